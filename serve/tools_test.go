package serve

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/template"
)

// startDefault serves the embedded default model (a ChatML template: the
// Hermes tool-call format).
func startDefault(t *testing.T) *testServer {
	t.Helper()
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, func(o *Options) {
		o.ModelPath, o.Model, o.ModelName = "", f, defaultmodel.Name
	})
}

var weatherTool = map[string]any{"type": "function", "function": map[string]any{
	"name": "get_weather", "description": "The weather in a city.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}

var timeTool = map[string]any{"type": "function", "function": map[string]any{"name": "get_time"}}

// chatReply is a whole chat completion.
type chatReply struct {
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role      string         `json:"role"`
			Content   *string        `json:"content"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

func (ts *testServer) chatReply(t *testing.T, body map[string]any) chatReply {
	t.Helper()
	var out chatReply
	ts.postJSON(t, "/v1/chat/completions", body, &out)
	return out
}

// streamReply assembles a streamed chat completion per choice: content,
// calls (from their deltas) and finish reasons.
type streamChoice struct {
	content   string
	calls     []wireToolCall
	finish    string
	argDeltas int // deltas that carried argument text
}

func (ts *testServer) streamReply(t *testing.T, body map[string]any) ([]streamChoice, usage) {
	t.Helper()
	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	b, _ := json.Marshal(body)
	resp, raw := ts.post(t, "/v1/chat/completions", string(b))
	if resp.StatusCode != 200 {
		t.Fatalf("got %d %s", resp.StatusCode, raw)
	}
	var out []streamChoice
	var u usage
	for _, ev := range sseEvents(raw) {
		if ev == "[DONE]" {
			continue
		}
		var parsed struct {
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content   *string         `json:"content"`
					ToolCalls []deltaToolCall `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev), &parsed); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		if parsed.Usage != nil {
			u = *parsed.Usage
		}
		for _, ch := range parsed.Choices {
			for len(out) <= ch.Index {
				out = append(out, streamChoice{})
			}
			sc := &out[ch.Index]
			if ch.Delta.Content != nil {
				sc.content += *ch.Delta.Content
			}
			for _, d := range ch.Delta.ToolCalls {
				if d.Index == len(sc.calls) {
					sc.calls = append(sc.calls, wireToolCall{ID: d.ID, Type: d.Type, Function: deltaFunction{Name: d.Function.Name}})
				}
				if d.Index >= len(sc.calls) {
					t.Fatalf("delta for call %d before call %d", d.Index, len(sc.calls))
				}
				sc.calls[d.Index].Function.Arguments += d.Function.Arguments
				if d.Function.Arguments != "" {
					sc.argDeltas++
				}
			}
			if ch.FinishReason != nil {
				sc.finish = *ch.FinishReason
			}
		}
	}
	return out, u
}

func TestChatToolChoiceForcesCall(t *testing.T) {
	ts := startDefault(t)
	for _, c := range []struct {
		name   string
		choice any
		want   []string // names the call may have
	}{
		{"named", map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}, []string{"get_weather"}},
		{"required", "required", []string{"get_weather", "get_time"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := func() map[string]any {
				return map[string]any{"model": defaultmodel.Name, "temperature": 0, "max_tokens": 200, "seed": 3,
					"tools": []any{weatherTool, timeTool}, "tool_choice": c.choice,
					"messages": []any{map[string]any{"role": "user", "content": "What is the weather in Paris?"}}}
			}
			r := ts.chatReply(t, body())
			if len(r.Choices) != 1 {
				t.Fatalf("got %d choices, want 1", len(r.Choices))
			}
			ch := r.Choices[0]
			if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
				t.Fatalf("got finish %q and %d calls (content %q), want tool_calls and 1", ch.FinishReason, len(ch.Message.ToolCalls), *ch.Message.Content)
			}
			call := ch.Message.ToolCalls[0]
			if !slices.Contains(c.want, call.Function.Name) || call.Type != "function" || !strings.HasPrefix(call.ID, "call_") {
				t.Errorf("got call %+v, want a function call of one of %v with a call_ id", call, c.want)
			}
			var args map[string]any
			if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
				t.Errorf("arguments %q are not a JSON object: %v", call.Function.Arguments, err)
			}
			if ch.Message.Content != nil {
				t.Errorf("got content %q, want null beside the call", *ch.Message.Content)
			}
			streamed, u := ts.streamReply(t, body())
			if len(streamed) != 1 {
				t.Fatalf("streamed %d choices, want 1", len(streamed))
			}
			sc := streamed[0]
			if sc.finish != "tool_calls" || len(sc.calls) != 1 || sc.calls[0].Function != call.Function || sc.content != "" {
				t.Errorf("streamed finish %q calls %+v content %q, want tool_calls, %+v and no content", sc.finish, sc.calls, sc.content, call)
			}
			// How many deltas carry the arguments depends on how many
			// tokens each of the scheduler's steps hands over (a loaded
			// machine batches them): TestToolStreamReleasesArgs checks that
			// they are released as they come.
			if sc.argDeltas < 1 {
				t.Errorf("the arguments came in %d deltas, want at least 1", sc.argDeltas)
			}
			if u.CompletionTokens != r.Usage.CompletionTokens {
				t.Errorf("streamed %d completion tokens, want %d", u.CompletionTokens, r.Usage.CompletionTokens)
			}
		})
	}
}

func TestChatToolRoundTrip(t *testing.T) {
	ts := startDefault(t)
	args := `{"city": "Paris"}`
	r := ts.chatReply(t, map[string]any{"model": defaultmodel.Name, "temperature": 0, "max_tokens": 16,
		"tools": []any{weatherTool},
		"messages": []any{
			map[string]any{"role": "user", "content": "What is the weather in Paris?"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": "call_1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": args}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": `{"temp": 21}`},
		}})
	if len(r.Choices) != 1 || r.Choices[0].Message.Role != "assistant" {
		t.Fatalf("got %+v, want one assistant choice", r)
	}
	// The history renders the call as the model writes it, and the tools
	// in a system message.
	if r.Usage.PromptTokens < 60 {
		t.Errorf("got a prompt of %d tokens, want the tools and the call rendered in it (at least 60)", r.Usage.PromptTokens)
	}
}

func TestToolMessagesRender(t *testing.T) {
	calls, e := parseWireCalls(json.RawMessage(`[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]`), "m")
	if e != nil {
		t.Fatal(e)
	}
	tools, e := parseTools(json.RawMessage(`[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`), "tools")
	if e != nil {
		t.Fatal(e)
	}
	// A plain ChatML template: it reads neither tools nor tool_calls.
	src := "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
	got := toolMessages(src, detectToolFormat(src), []template.Message{
		{Role: "user", Content: "hi"}, {Role: "assistant", NullContent: true, ToolCalls: calls}, {Role: "tool", Content: "2", ToolCallID: "c1"}}, tools)
	if len(got) != 4 || got[0].Role != "system" || !strings.Contains(got[0].Content, `{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}`) {
		t.Fatalf("got %+v, want a system message with the tool first", got)
	}
	if want := "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\":1}}\n</tool_call>"; got[2].Content != want || got[2].NullContent || got[2].ToolCalls != nil {
		t.Errorf("got assistant %+v, want content %q", got[2], want)
	}
	// What the model writes for that call parses back to it.
	_, back := parseToolCalls(toolFormatHermes, got[2].Content)
	if len(back) != 1 || back[0].Name != "f" || back[0].Arguments != `{"a":1}` {
		t.Errorf("parsed back %v, want f {\"a\":1}", back)
	}
}

func TestChatN(t *testing.T) {
	ts := startDefault(t)
	body := func(n int, seed int) map[string]any {
		return map[string]any{"model": defaultmodel.Name, "temperature": 1, "max_tokens": 12, "seed": seed, "n": n,
			"messages": []any{map[string]any{"role": "user", "content": "Tell me a story."}}}
	}
	r := ts.chatReply(t, body(3, 10))
	if len(r.Choices) != 3 {
		t.Fatalf("got %d choices, want 3", len(r.Choices))
	}
	sum := 0
	for i, ch := range r.Choices {
		if ch.Index != i {
			t.Errorf("choice %d has index %d", i, ch.Index)
		}
		one := ts.chatReply(t, body(1, 10+i))
		if *ch.Message.Content != *one.Choices[0].Message.Content || ch.FinishReason != one.Choices[0].FinishReason {
			t.Errorf("choice %d: got %q (%s), want %q (%s), the request alone with seed %d", i, *ch.Message.Content, ch.FinishReason,
				*one.Choices[0].Message.Content, one.Choices[0].FinishReason, 10+i)
		}
		sum += one.Usage.CompletionTokens
	}
	if r.Usage.CompletionTokens != sum || r.Usage.PromptTokens != ts.chatReply(t, body(1, 10)).Usage.PromptTokens {
		t.Errorf("got usage %+v, want %d completion tokens (summed) and the prompt counted once", r.Usage, sum)
	}
	streamed, u := ts.streamReply(t, body(3, 10))
	if len(streamed) != 3 || u.CompletionTokens != sum {
		t.Fatalf("streamed %d choices and %d tokens, want 3 and %d", len(streamed), u.CompletionTokens, sum)
	}
	for i, sc := range streamed {
		if sc.content != *r.Choices[i].Message.Content || sc.finish != r.Choices[i].FinishReason {
			t.Errorf("streamed choice %d: %q (%s), want %q (%s)", i, sc.content, sc.finish, *r.Choices[i].Message.Content, r.Choices[i].FinishReason)
		}
	}
}

func TestChatToolsBadInput(t *testing.T) {
	ts := startDefault(t)
	user := map[string]any{"role": "user", "content": "hi"}
	for _, c := range []struct {
		name  string
		body  map[string]any
		param string
	}{
		{"tool without a name", map[string]any{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"description": "x"}}}}, "tools[0].function.name"},
		{"tool with a bad name", map[string]any{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "a b"}}}}, "tools[0].function.name"},
		{"tool of another type", map[string]any{"tools": []any{map[string]any{"type": "code_interpreter"}}}, "tools[0].type"},
		{"two tools one name", map[string]any{"tools": []any{timeTool, timeTool}}, "tools[1].function.name"},
		{"parameters not an object", map[string]any{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": []any{}}}}}, "tools[0].function.parameters"},
		{"unknown named function", map[string]any{"tools": []any{timeTool}, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "nope"}}}, "tool_choice.function.name"},
		{"bad tool_choice", map[string]any{"tools": []any{timeTool}, "tool_choice": "always"}, "tool_choice"},
		{"required without tools", map[string]any{"tool_choice": "required"}, "tool_choice"},
		{"tool message without id", map[string]any{"messages": []any{user, map[string]any{"role": "tool", "content": "1"}}}, "messages[1].tool_call_id"},
		{"tool_calls on a user message", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x", "tool_calls": []any{}}}}, "messages[0].tool_calls"},
		{"call arguments not an object", map[string]any{"messages": []any{user, map[string]any{"role": "assistant", "tool_calls": []any{
			map[string]any{"id": "1", "type": "function", "function": map[string]any{"name": "f", "arguments": "[1]"}}}}}}, "messages[1].tool_calls[0].function.arguments"},
		{"call without a name", map[string]any{"messages": []any{user, map[string]any{"role": "assistant", "tool_calls": []any{
			map[string]any{"id": "1", "type": "function", "function": map[string]any{"arguments": "{}"}}}}}}, "messages[1].tool_calls[0].function.name"},
		{"n zero", map[string]any{"n": 0}, "n"},
		{"n too large", map[string]any{"n": 17}, "n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := map[string]any{"model": defaultmodel.Name, "messages": []any{user}, "max_tokens": 2}
			for k, v := range c.body {
				body[k] = v
			}
			b, _ := json.Marshal(body)
			resp, raw := ts.post(t, "/v1/chat/completions", string(b))
			var e struct {
				Error struct {
					Param string `json:"param"`
				} `json:"error"`
			}
			json.Unmarshal(raw, &e)
			if resp.StatusCode != 400 || e.Error.Param != c.param {
				t.Errorf("got %d param %q (%s), want 400 naming %q", resp.StatusCode, e.Error.Param, raw, c.param)
			}
		})
	}
}

func TestToolCallGrammar(t *testing.T) {
	defs, e := parseTools(json.RawMessage(`[
		{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"unit":{"enum":["c","f"]}},"required":["city","days","unit"],"additionalProperties":false}}},
		{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{},"additionalProperties":false}}},
		{"type":"function","function":{"name":"free"}}]`), "tools")
	if e != nil {
		t.Fatal(e)
	}
	for _, c := range []struct {
		f    toolFormat
		text string
		want bool
	}{
		{toolFormatHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2, \"unit\": \"c\"}}\n</tool_call>", true},
		{toolFormatHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": \"Paris\", \"days\": 2, \"unit\": \"c\"}}\n</tool_call>", false},
		{toolFormatHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2, \"unit\": \"k\"}}\n</tool_call>", false},
		{toolFormatHermes, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", true},
		{toolFormatHermes, "<tool_call>\n{\"name\": \"free\", \"arguments\": {}}\n</tool_call>", true},
		{toolFormatHermes, "<tool_call>\n{\"name\": \"free\", \"arguments\": {\"x\": 1}}\n</tool_call>", false},
		{toolFormatHermes, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": { }}\n</tool_call>", false},
		{toolFormatHermes, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>", false},
		{toolFormatHermes, "Sure: <tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", false},
		{toolFormatLlama3, "{\"name\": \"get_time\", \"parameters\": {}}", true},
		{toolFormatMistral, "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}]", true},
	} {
		t.Run(fmt.Sprintf("%v %.40s", c.f, c.text), func(t *testing.T) {
			g, err := toolCallGrammar(c.f, defs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := g.Match(c.text)
			if err != nil || got != c.want {
				t.Errorf("got %v (%v), want %v", got, err, c.want)
			}
			// Whatever the grammar accepts parses back as one call.
			if got {
				if _, calls := parseToolCalls(c.f, c.text); len(calls) != 1 {
					t.Errorf("parsed %d calls, want 1", len(calls))
				}
			}
		})
	}
	// A schema that is not flat goes to infer/grammar's schema compiler.
	nested, e := parseTools(json.RawMessage(`[{"type":"function","function":{"name":"locate","parameters":{"type":"object","properties":{"at":{"type":"object","properties":{"lat":{"type":"number"}},"required":["lat"]}},"required":["at"]}}}]`), "tools")
	if e != nil {
		t.Fatal(e)
	}
	if compactCallGBNF(toolFormatHermes, nested) != "" {
		t.Errorf("a nested schema got a compact grammar")
	}
	g, err := toolCallGrammar(toolFormatHermes, nested)
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]bool{
		"<tool_call>\n{\"name\": \"locate\", \"arguments\": {\"at\": {\"lat\": 1.5}}}\n</tool_call>":   true,
		"<tool_call>\n{\"name\": \"locate\", \"arguments\": {\"at\": {\"lat\": \"x\"}}}\n</tool_call>": false,
	} {
		if got, err := g.Match(text); err != nil || got != want {
			t.Errorf("nested %q: got %v (%v), want %v", text, got, err, want)
		}
	}
}

func TestCompletionsN(t *testing.T) {
	ts := startDefault(t)
	body := func(n, seed int, stream bool) map[string]any {
		return map[string]any{"model": defaultmodel.Name, "prompt": "Once upon a time", "max_tokens": 10, "temperature": 1,
			"seed": seed, "n": n, "stream": stream}
	}
	type reply struct {
		Choices []struct {
			Index        int    `json:"index"`
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	var two reply
	ts.postJSON(t, "/v1/completions", body(2, 5, false), &two)
	if len(two.Choices) != 2 {
		t.Fatalf("got %d choices, want 2", len(two.Choices))
	}
	sum := 0
	for i := range 2 {
		var one reply
		ts.postJSON(t, "/v1/completions", body(1, 5+i, false), &one)
		if two.Choices[i].Index != i || two.Choices[i].Text != one.Choices[0].Text || two.Choices[i].FinishReason != one.Choices[0].FinishReason {
			t.Errorf("choice %d: got %+v, want %+v (seed %d alone)", i, two.Choices[i], one.Choices[0], 5+i)
		}
		sum += one.Usage.CompletionTokens
	}
	if two.Usage.CompletionTokens != sum {
		t.Errorf("got %d completion tokens, want %d (summed)", two.Usage.CompletionTokens, sum)
	}
	b, _ := json.Marshal(body(2, 5, true))
	resp, raw := ts.post(t, "/v1/completions", string(b))
	if resp.StatusCode != 200 {
		t.Fatalf("got %d %s", resp.StatusCode, raw)
	}
	texts := make([]string, 2)
	for _, ev := range sseEvents(raw) {
		var c reply
		if ev == "[DONE]" || json.Unmarshal([]byte(ev), &c) != nil {
			continue
		}
		for _, ch := range c.Choices {
			texts[ch.Index] += ch.Text
		}
	}
	for i := range 2 {
		if texts[i] != two.Choices[i].Text {
			t.Errorf("streamed choice %d: got %q, want %q", i, texts[i], two.Choices[i].Text)
		}
	}
	b, _ = json.Marshal(body(0, 5, false))
	if resp, _ := ts.post(t, "/v1/completions", string(b)); resp.StatusCode != 400 {
		t.Errorf("n 0: got %d, want 400", resp.StatusCode)
	}
}
