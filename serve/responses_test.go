package serve

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/infertest"
)

// responseReply is the part of a Response the tests read.
type responseReply struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Status             string            `json:"status"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Output             []json.RawMessage `json:"output"`
	Usage              responsesUsage    `json:"usage"`
	IncompleteDetails  *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

type outputItem struct {
	Type      string       `json:"type"`
	ID        string       `json:"id"`
	Role      string       `json:"role"`
	Content   []outputText `json:"content"`
	CallID    string       `json:"call_id"`
	Name      string       `json:"name"`
	Arguments string       `json:"arguments"`
	Status    string       `json:"status"`
}

func (r responseReply) items(t *testing.T) []outputItem {
	t.Helper()
	out := make([]outputItem, len(r.Output))
	for i, raw := range r.Output {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func (r responseReply) text(t *testing.T) string {
	var b strings.Builder
	for _, it := range r.items(t) {
		for _, c := range it.Content {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func startDefaultHome(t *testing.T, home string, keys string) *testServer {
	t.Helper()
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, func(o *Options) {
		o.ModelPath, o.Model, o.ModelName, o.Home = "", f, defaultmodel.Name, home
		o.APIKeysFile = keys
	})
}

func TestResponses(t *testing.T) {
	home := t.TempDir()
	keys := writeKeys(t, "key-aaaaaaaaaaaaaaaa alice", "key-bbbbbbbbbbbbbbbb bob")
	ts := startDefaultHome(t, home, keys)
	a, b := []string{"Authorization", "Bearer key-aaaaaaaaaaaaaaaa"}, []string{"Authorization", "Bearer key-bbbbbbbbbbbbbbbb"}
	long := infertest.Story(0, 150)
	var first responseReply
	ts.postJSON(t, "/v1/responses", map[string]any{"model": defaultmodel.Name, "input": long, "instructions": "You tell stories.",
		"max_output_tokens": 8, "temperature": 0}, &first, a...)
	if first.Object != "response" || !strings.HasPrefix(first.ID, "resp_") || first.Usage.OutputTokens == 0 || first.Usage.InputTokens < 128 {
		t.Fatalf("got %+v, want a response of some tokens from a prompt of two blocks or more", first)
	}
	if items := first.items(t); len(items) != 1 || items[0].Type != "message" || items[0].Role != "assistant" || items[0].Status != first.Status {
		t.Fatalf("got output %+v, want one assistant message whose status is the response's %q", items, first.Status)
	}
	if first.Status == "incomplete" && (first.IncompleteDetails == nil || first.IncompleteDetails.Reason != "max_output_tokens") {
		t.Errorf("got incomplete details %+v, want max_output_tokens", first.IncompleteDetails)
	}
	if err := ts.s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Retrieval: the owner only.
	resp, raw := ts.do(t, "GET", "/v1/responses/"+first.ID, "", a...)
	if resp.StatusCode != 200 || !strings.Contains(string(raw), first.ID) {
		t.Errorf("GET own response: %d %s", resp.StatusCode, raw)
	}
	if resp, _ := ts.do(t, "GET", "/v1/responses/"+first.ID, "", b...); resp.StatusCode != 404 {
		t.Errorf("GET another tenant's response: got %d, want 404", resp.StatusCode)
	}
	cont := map[string]any{"model": defaultmodel.Name, "input": "And then?", "instructions": "You tell stories.",
		"previous_response_id": first.ID, "max_output_tokens": 8, "temperature": 0}
	body, _ := json.Marshal(cont)
	if resp, raw := ts.post(t, "/v1/responses", string(body), b...); resp.StatusCode != 404 || !strings.Contains(string(raw), `"param":"previous_response_id"`) {
		t.Errorf("bob continuing alice's response: got %d %s, want 404 naming previous_response_id", resp.StatusCode, raw)
	}
	// Continued after a restart: the conversation's prefix is a cache hit.
	ts.stop(t)
	ts = startDefaultHome(t, home, keys)
	var second responseReply
	ts.postJSON(t, "/v1/responses", cont, &second, a...)
	if second.PreviousResponseID == nil || *second.PreviousResponseID != first.ID {
		t.Errorf("got previous_response_id %v, want %s", second.PreviousResponseID, first.ID)
	}
	if second.Usage.InputTokens <= first.Usage.InputTokens+first.Usage.OutputTokens-1 {
		t.Errorf("continued prompt has %d tokens, want more than the first turn's %d + %d", second.Usage.InputTokens, first.Usage.InputTokens, first.Usage.OutputTokens)
	}
	if c := second.Usage.InputTokensDetails.CachedTokens; c < 128 {
		t.Errorf("continued response: %d cached tokens, want the first turn's blocks (at least 128)", c)
	}
	// The same continuation, streamed: the same text, and the events a
	// client expects.
	cont["stream"] = true
	body, _ = json.Marshal(cont)
	resp, raw = ts.post(t, "/v1/responses", string(body), a...)
	if resp.StatusCode != 200 {
		t.Fatalf("streamed: %d %s", resp.StatusCode, raw)
	}
	var (
		types []string
		delta strings.Builder
		done  responseReply
	)
	for i, ev := range sseEvents(raw) {
		var e struct {
			Type     string         `json:"type"`
			Seq      int            `json:"sequence_number"`
			Delta    string         `json:"delta"`
			Response *responseReply `json:"response"`
		}
		if err := json.Unmarshal([]byte(ev), &e); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		if e.Seq != i {
			t.Errorf("event %d has sequence_number %d", i, e.Seq)
		}
		types = append(types, e.Type)
		if e.Type == "response.output_text.delta" {
			delta.WriteString(e.Delta)
		}
		if e.Type == "response.completed" || e.Type == "response.incomplete" {
			done = *e.Response
		}
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.delta"}
	if len(types) < len(want)+4 || strings.Join(types[:len(want)], " ") != strings.Join(want, " ") ||
		strings.Join(types[len(types)-4:], " ") != "response.output_text.done response.content_part.done response.output_item.done response."+done.Status {
		t.Errorf("got events %v", types)
	}
	if delta.String() != second.text(t) || done.text(t) != second.text(t) || done.Usage.OutputTokens != second.Usage.OutputTokens {
		t.Errorf("streamed %q (completed: %q, %d tokens), want %q (%d tokens)", delta.String(), done.text(t), done.Usage.OutputTokens, second.text(t), second.Usage.OutputTokens)
	}
}

func TestResponsesTools(t *testing.T) {
	ts := startDefault(t)
	tools := []any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}
	var r responseReply
	ts.postJSON(t, "/v1/responses", map[string]any{"model": defaultmodel.Name, "input": "Weather in Oslo?", "tools": tools,
		"tool_choice": "required", "max_output_tokens": 400, "temperature": 0}, &r)
	items := r.items(t)
	if len(items) != 1 || items[0].Type != "function_call" || items[0].Name != "get_weather" || !strings.HasPrefix(items[0].CallID, "call_") {
		t.Fatalf("got output %+v, want one get_weather function_call", items)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(items[0].Arguments), &args); err != nil {
		t.Fatalf("arguments %q: %v", items[0].Arguments, err)
	}
	// The round trip: the call's output continues the stored response.
	var next responseReply
	ts.postJSON(t, "/v1/responses", map[string]any{"model": defaultmodel.Name, "previous_response_id": r.ID, "tools": tools,
		"input":             []any{map[string]any{"type": "function_call_output", "call_id": items[0].CallID, "output": `{"temp": 3}`}},
		"max_output_tokens": 8, "temperature": 0}, &next)
	if len(next.items(t)) == 0 || next.Usage.InputTokens <= r.Usage.InputTokens {
		t.Errorf("got %+v, want output from a longer prompt", next)
	}
	// Without storing: the earlier output items, as a client passes them
	// back, and the call's output.
	input := []any{map[string]any{"role": "user", "content": "Weather in Oslo?"}}
	for _, raw := range r.Output {
		input = append(input, raw)
	}
	input = append(input, map[string]any{"type": "function_call_output", "call_id": items[0].CallID, "output": `{"temp": 3}`})
	var manual responseReply
	ts.postJSON(t, "/v1/responses", map[string]any{"model": defaultmodel.Name, "tools": tools, "input": input, "store": false,
		"max_output_tokens": 8, "temperature": 0}, &manual)
	if manual.Usage.InputTokens != next.Usage.InputTokens || manual.text(t) != next.text(t) {
		t.Errorf("output items passed back: %d input tokens, %q; want %d, %q as with previous_response_id",
			manual.Usage.InputTokens, manual.text(t), next.Usage.InputTokens, next.text(t))
	}
	// Bad input names the field.
	for _, c := range []struct {
		name  string
		body  map[string]any
		param string
	}{
		{"tool without a name", map[string]any{"input": "x", "tools": []any{map[string]any{"type": "function"}}}, "tools[0].name"},
		{"web search", map[string]any{"input": "x", "tools": []any{map[string]any{"type": "web_search"}}}, "tools[0]"},
		{"no input", map[string]any{}, "input"},
		{"call output without id", map[string]any{"input": []any{map[string]any{"type": "function_call_output", "output": "1"}}}, "input[0].call_id"},
		{"call with bad arguments", map[string]any{"input": []any{map[string]any{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[]"}}}, "input[0].arguments"},
		{"image part", map[string]any{"input": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_image"}}}}}, "input[0].content[0]"},
		{"max_output_tokens 0", map[string]any{"input": "x", "max_output_tokens": 0}, "max_output_tokens"},
		{"unknown previous", map[string]any{"input": "x", "previous_response_id": "resp_nope"}, "previous_response_id"},
		{"forced call of a bad schema", map[string]any{"input": "x", "tool_choice": "required", "tools": []any{map[string]any{"type": "function", "name": "f",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "#/x"}}}}}}, "tools[0].parameters"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.body["model"] = defaultmodel.Name
			b, _ := json.Marshal(c.body)
			resp, raw := ts.post(t, "/v1/responses", string(b))
			var e struct {
				Error struct {
					Param string `json:"param"`
				} `json:"error"`
			}
			json.Unmarshal(raw, &e)
			if resp.StatusCode/100 != 4 || !strings.HasPrefix(e.Error.Param, c.param) {
				t.Errorf("got %d param %q (%s), want 4xx naming %q", resp.StatusCode, e.Error.Param, raw, c.param)
			}
		})
	}
}

// TestResponsesOutputOrder: a reply's output items come in the order the
// model wrote them, whole as streamed: text after a call is a message item
// of its own after it (never glued onto a message before the call), every
// item has its own id, and a streamed item is done before the next one is
// added.
func TestResponsesOutputOrder(t *testing.T) {
	call := "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"
	cases := []struct {
		name, reply string
		want        []string
	}{
		{"call then text", call + "Done.", []string{`call f {"a":1}`, "message Done."}},
		{"text, call, text", "Let me look." + call + "Done.", []string{"message Let me look.", `call f {"a":1}`, "message Done."}},
		{"text, two calls, text", "Look." + call + call + "Done.", []string{"message Look.", `call f {"a":1}`, `call f {"a":1}`, "message Done."}},
	}
	kinds := func(t *testing.T, rs *responseState) []string {
		var out []string
		ids := map[string]bool{}
		for _, it := range rs.output {
			var id string
			switch it := it.(type) {
			case *functionCallItem:
				out = append(out, "call "+it.Name+" "+it.Arguments)
				id = it.ID
			case *messageItem:
				out = append(out, "message "+it.Content[0].Text)
				id = it.ID
			}
			if ids[id] {
				t.Errorf("two output items have the id %q", id)
			}
			ids[id] = true
		}
		return out
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			whole := &responseState{g: &genReq{}, reqID: "r", ts: &toolStream{f: toolFormatHermes}}
			whole.whole(c.reply)
			if got := kinds(t, whole); !slices.Equal(got, c.want) {
				t.Errorf("whole: got output %q, want %q", got, c.want)
			}
			rec := httptest.NewRecorder()
			streamed := &responseState{g: &genReq{}, reqID: "r", ts: &toolStream{f: toolFormatHermes, record: true}, sw: newStream(rec, true)}
			for i := 0; i < len(c.reply); i += 7 {
				streamed.ts.write(c.reply[i:min(i+7, len(c.reply))])
				streamed.feed(streamed.ts.drain())
			}
			streamed.ts.flush()
			streamed.feed(streamed.ts.drain())
			streamed.closeMessage("completed") // as object does once the reply is finished
			if got := kinds(t, streamed); !slices.Equal(got, c.want) {
				t.Errorf("streamed: got output %q, want %q", got, c.want)
			}
			// Items open and close one at a time, in output order.
			open := -1
			for _, ev := range sseEvents(rec.Body.Bytes()) {
				var e struct {
					Type        string `json:"type"`
					OutputIndex int    `json:"output_index"`
				}
				if err := json.Unmarshal([]byte(ev), &e); err != nil {
					t.Fatal(err)
				}
				switch {
				case e.Type == "response.output_item.added" && open >= 0:
					t.Fatalf("item %d added while item %d is still open", e.OutputIndex, open)
				case e.Type == "response.output_item.added":
					open = e.OutputIndex
				case e.Type == "response.output_item.done":
					open = -1
				case strings.HasSuffix(e.Type, ".delta") && e.OutputIndex != open:
					t.Fatalf("%s for item %d while item %d is open", e.Type, e.OutputIndex, open)
				}
			}
		})
	}
}

// TestResponsesStoredTurns checks that a stored response's assistant turns
// are what the same output items give when a client passes them back as
// input, for text, calls, both in either order, and an incomplete call.
func TestResponsesStoredTurns(t *testing.T) {
	cases := []struct {
		name, reply string
		calls       int // tool calls the stored turns must carry
	}{
		{"text", "Hello there.", 0},
		{"call", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", 1},
		{"call then text", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>Done.", 1},
		{"text then two calls", "Let me look.<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call><tool_call>\n{\"name\": \"g\", \"arguments\": {\"b\": [2]}}\n</tool_call>", 2},
		{"text, call, text", "Let me look.<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>Done.", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs := &responseState{g: &genReq{}, reqID: "r", ts: &toolStream{f: toolFormatHermes}}
			rs.whole(c.reply)
			got := rs.assistantTurns(c.reply)
			items, err := json.Marshal(map[string]any{"input": append([]any{map[string]any{"role": "user", "content": "q"}}, rs.output...)})
			if err != nil {
				t.Fatal(err)
			}
			var q responsesRequest
			if err := json.Unmarshal(items, &q); err != nil {
				t.Fatal(err)
			}
			back, e := q.inputMessages()
			if e != nil {
				t.Fatalf("passing the output back: %v", e)
			}
			if !reflect.DeepEqual(got, back[1:]) {
				t.Errorf("stored turns %+v, want %+v (the output items passed back)", got, back[1:])
			}
			n := 0
			for _, m := range got {
				n += len(m.ToolCalls)
			}
			if n != c.calls {
				t.Errorf("stored turns carry %d calls, want %d", n, c.calls)
			}
		})
	}
	// A call cut short (arguments not an object) keeps the model's text.
	rs := &responseState{g: &genReq{}, reqID: "r", ts: &toolStream{f: toolFormatHermes}}
	rs.output = []any{&functionCallItem{Type: "function_call", CallID: "call_x", Name: "f", Arguments: `{"a": `, Status: "incomplete"}}
	got := rs.assistantTurns("raw text")
	if len(got) != 1 || got[0].Content != "raw text" || len(got[0].ToolCalls) != 0 {
		t.Errorf("incomplete call stored as %+v, want the model's text", got)
	}
}

// TestResponsesStreamTerminalEvent: a streamed response ends with the
// event its status names, as OpenAI's stream does: response.incomplete
// for a reply cut by max_output_tokens, response.completed for one that
// ended by itself; the message item of an incomplete reply is incomplete
// too.
func TestResponsesStreamTerminalEvent(t *testing.T) {
	ts := startDefaultHome(t, t.TempDir(), "")
	for _, c := range []struct {
		name   string
		body   map[string]any
		status string // the status the reply must have ("" for either)
	}{
		{"cut by max_output_tokens", map[string]any{"max_output_tokens": 2}, "incomplete"},
		{"ended by itself", map[string]any{"max_output_tokens": 200}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := map[string]any{"model": defaultmodel.Name, "input": "Hi!", "temperature": 0, "stream": true}
			for k, v := range c.body {
				body[k] = v
			}
			b, _ := json.Marshal(body)
			resp, raw := ts.post(t, "/v1/responses", string(b))
			if resp.StatusCode != 200 {
				t.Fatalf("got %d %s", resp.StatusCode, raw)
			}
			evs := sseEvents(raw)
			var last struct {
				Type     string        `json:"type"`
				Response responseReply `json:"response"`
			}
			if err := json.Unmarshal([]byte(evs[len(evs)-1]), &last); err != nil {
				t.Fatal(err)
			}
			st := last.Response.Status
			if c.status != "" && st != c.status {
				t.Fatalf("got status %q, want %q", st, c.status)
			}
			if last.Type != "response."+st {
				t.Errorf("the last event is %s for a response whose status is %q, want response.%s", last.Type, st, st)
			}
			for _, it := range last.Response.items(t) {
				if it.Type == "message" && st == "incomplete" && it.Status != "incomplete" {
					t.Errorf("a message item of an incomplete response has status %q, want incomplete", it.Status)
				}
			}
		})
	}
}
