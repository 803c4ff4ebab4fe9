package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/muserhq/muser/infer/template"
	"github.com/muserhq/muser/serve/respstore"
	"github.com/muserhq/muser/serve/sched"
)

// responsesRequest is POST /v1/responses (OpenAI's Responses API).
type responsesRequest struct {
	Model string          `json:"model"`
	Input *responsesInput `json:"input"`
	samplingFields
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Stream             *bool             `json:"stream"`
	Tools              json.RawMessage   `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	PreviousResponseID string            `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Metadata           map[string]string `json:"metadata"`
	User               string            `json:"user"`
	CacheSalt          string            `json:"cache_salt"`
	Text               *responsesText    `json:"text"`
	Truncation         *string           `json:"truncation"`
	// Accepted without effect.
	ServiceTier      *string `json:"service_tier"`
	SafetyIdentifier string  `json:"safety_identifier"`
	PromptCacheKey   string  `json:"prompt_cache_key"`
	// Known and not supported yet: a 400 when set.
	Reasoning    json.RawMessage `json:"reasoning"`
	Include      json.RawMessage `json:"include"`
	Background   json.RawMessage `json:"background"`
	Conversation json.RawMessage `json:"conversation"`
	MaxToolCalls json.RawMessage `json:"max_tool_calls"`
	TopLogprobs  json.RawMessage `json:"top_logprobs"`
	Prompt       json.RawMessage `json:"prompt"`
}

type responsesText struct {
	Format    *responsesFormat `json:"format"`
	Verbosity json.RawMessage  `json:"verbosity"`
}

type responsesFormat struct {
	Type string `json:"type"`
}

// responsesInput is input: a string or a list of items.
type responsesInput struct {
	Text  string
	Items []responsesItem
}

// UnmarshalJSON accepts a string or an array of input items.
func (in *responsesInput) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &in.Text)
	case len(b) > 0 && b[0] == '[':
		return decodeStrict(b, &in.Items)
	}
	return fmt.Errorf("want a string or an array of input items")
}

// responsesItem is one input item: a message, a function call (an earlier
// output) or a function call's output.
type responsesItem struct {
	Type      string            `json:"type"`
	ID        string            `json:"id"`
	Status    string            `json:"status"`
	Role      string            `json:"role"`
	Content   *responsesContent `json:"content"`
	CallID    string            `json:"call_id"`
	Name      string            `json:"name"`
	Arguments *string           `json:"arguments"`
	Output    *string           `json:"output"`
}

// responsesContent is a message's content: a string or a list of parts.
type responsesContent struct {
	Text  string
	Parts []responsesPart
}

type responsesPart struct {
	Type        string          `json:"type"`
	Text        string          `json:"text"`
	Annotations json.RawMessage `json:"annotations"`
	Logprobs    json.RawMessage `json:"logprobs"`
}

// UnmarshalJSON accepts a string or an array of content parts.
func (c *responsesContent) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &c.Text)
	case len(b) > 0 && b[0] == '[':
		return decodeStrict(b, &c.Parts)
	}
	return fmt.Errorf("want a string or an array of content parts")
}

func (q *responsesRequest) unsupported() *apiError {
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{
		{"reasoning", q.Reasoning}, {"include", q.Include}, {"conversation", q.Conversation},
		{"max_tool_calls", q.MaxToolCalls}, {"top_logprobs", q.TopLogprobs}, {"prompt", q.Prompt},
	} {
		if isSet(f.raw) {
			return unsupported(f.name, "")
		}
	}
	if isSet(q.Background) && string(q.Background) != "false" {
		return unsupported("background", "")
	}
	if q.Text != nil && q.Text.Format != nil && q.Text.Format.Type != "text" {
		return unsupported("text.format.type", "text.format %q is not supported yet; only \"text\" is", q.Text.Format.Type)
	}
	if q.Truncation != nil && *q.Truncation != "disabled" {
		return unsupported("truncation", "truncation %q is not supported; only \"disabled\" is", *q.Truncation)
	}
	return nil
}

// inputMessages converts input to template messages.
func (q *responsesRequest) inputMessages() ([]template.Message, *apiError) {
	if q.Input == nil {
		return nil, badRequest("invalid_value", "input", "input is missing")
	}
	if q.Input.Items == nil {
		return []template.Message{{Role: "user", Content: q.Input.Text}}, nil
	}
	if len(q.Input.Items) == 0 {
		return nil, badRequest("invalid_value", "input", "input is empty; want at least one item")
	}
	var out []template.Message
	for i, it := range q.Input.Items {
		p := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			role := it.Role
			switch role {
			case "user", "system", "assistant":
			case "developer":
				role = "system"
			case "":
				return nil, badRequest("invalid_value", p+".role", "%s.role is missing", p)
			default:
				return nil, badRequest("invalid_value", p+".role", "role %q is not one of user, system, developer, assistant", role)
			}
			if it.Content == nil {
				return nil, badRequest("invalid_value", p+".content", "%s.content is missing", p)
			}
			text := it.Content.Text
			if it.Content.Parts != nil {
				var texts []string
				for j, part := range it.Content.Parts {
					pp := fmt.Sprintf("%s.content[%d]", p, j)
					switch part.Type {
					case "input_text", "output_text":
						texts = append(texts, part.Text)
					default:
						return nil, unsupported(pp+".type", "content part type %q is not supported yet; only input_text and output_text are", part.Type)
					}
				}
				text = strings.Join(texts, "\n")
			}
			out = append(out, template.Message{Role: role, Content: text})
		case "function_call":
			if it.CallID == "" {
				return nil, badRequest("invalid_value", p+".call_id", "%s.call_id is missing", p)
			}
			if e := checkToolName(it.Name, p+".name"); e != nil {
				return nil, e
			}
			args := json.RawMessage(`{}`)
			if it.Arguments != nil {
				a, ok := argumentsObject(json.RawMessage(*it.Arguments))
				if !ok {
					return nil, badRequest("invalid_value", p+".arguments", "%s.arguments must be a JSON object's text", p)
				}
				args = a
			}
			call := template.ToolCall{ID: it.CallID, Name: it.Name, Arguments: args}
			// Calls right after an assistant message (or each other) are
			// that message's.
			if n := len(out); n > 0 && out[n-1].Role == "assistant" && i > 0 && (q.Input.Items[i-1].Type == "function_call" || q.Input.Items[i-1].Role == "assistant") {
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, call)
			} else {
				out = append(out, template.Message{Role: "assistant", NullContent: true, ToolCalls: []template.ToolCall{call}})
			}
		case "function_call_output":
			if it.CallID == "" {
				return nil, badRequest("invalid_value", p+".call_id", "%s.call_id is missing", p)
			}
			if it.Output == nil {
				return nil, badRequest("invalid_value", p+".output", "%s.output is missing", p)
			}
			out = append(out, template.Message{Role: "tool", ToolCallID: it.CallID, Content: *it.Output})
		default:
			return nil, unsupported(p+".type", "input item type %q is not supported; want message, function_call or function_call_output", it.Type)
		}
	}
	return out, nil
}

// responsesTools converts the Responses API's flat function tools
// ({"type", "name", "description", "parameters", "strict"}) to the chat
// form.
func responsesTools(raw json.RawMessage) (json.RawMessage, *apiError) {
	if !isSet(raw) {
		return nil, nil
	}
	var flat []json.RawMessage
	if err := json.Unmarshal(raw, &flat); err != nil {
		return nil, badRequest("invalid_type", "tools", "tools must be an array of tools")
	}
	out := make([]chatTool, len(flat))
	for i, el := range flat {
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		}
		p := fmt.Sprintf("tools[%d]", i)
		if err := decodeStrict(el, &t); err != nil {
			return nil, badRequest("invalid_value", p, "%s: %v", p, err)
		}
		if t.Type != "function" {
			return nil, unsupported(p+".type", "tool type %q is not supported; only \"function\" is", t.Type)
		}
		if e := checkToolName(t.Name, p+".name"); e != nil {
			return nil, e
		}
		out[i] = chatTool{Type: "function", Function: &toolFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, badRequest("invalid_value", "tools", "tools: %v", err)
	}
	return b, nil
}

// chatToolParam maps a chat-form tool field to the Responses API's.
func chatToolParam(e *apiError) *apiError {
	if e != nil && strings.HasPrefix(e.Param, "tools[") {
		e.Param = strings.Replace(e.Param, ".function.", ".", 1)
		e.Message = strings.Replace(e.Message, ".function.", ".", 1)
	}
	return e
}

func toTemplate(ms []respstore.Message) []template.Message {
	out := make([]template.Message, len(ms))
	for i, m := range ms {
		tm := template.Message{Role: m.Role, Content: m.Content, NullContent: m.NullOK, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			tm.ToolCalls = append(tm.ToolCalls, template.ToolCall{ID: c.ID, Name: c.Name, Arguments: json.RawMessage(c.Arguments)})
		}
		out[i] = tm
	}
	return out
}

func fromTemplate(ms []template.Message) []respstore.Message {
	out := make([]respstore.Message, len(ms))
	for i, m := range ms {
		sm := respstore.Message{Role: m.Role, Content: m.Content, NullOK: m.NullContent, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			args, _ := c.Arguments.(json.RawMessage)
			sm.ToolCalls = append(sm.ToolCalls, respstore.ToolCall{ID: c.ID, Name: c.Name, Arguments: string(args)})
		}
		out[i] = sm
	}
	return out
}

// responseObject is a Response.
type responseObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Error              any               `json:"error"`
	IncompleteDetails  any               `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Store              bool              `json:"store"`
	Temperature        float64           `json:"temperature"`
	TopP               float64           `json:"top_p"`
	Text               any               `json:"text"`
	ToolChoice         any               `json:"tool_choice"`
	Tools              any               `json:"tools"`
	Truncation         string            `json:"truncation"`
	Usage              *responsesUsage   `json:"usage"`
	User               *string           `json:"user"`
	Metadata           map[string]string `json:"metadata"`
}

type responsesUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  promptDetails  `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// outputText is an output_text content part.
type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

// messageItem is an output message.
type messageItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

// functionCallItem is an output function call.
type functionCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	var q responsesRequest
	if !s.decode(w, r, &q) {
		return
	}
	ri := info(r)
	g, conv, e := s.responsesGen(ri.tenant, &q)
	if e != nil {
		s.fail(w, r, e)
		return
	}
	task := s.submit(w, r, g)
	if task == nil {
		return
	}
	defer task.Cancel()
	// The response ID keys the stored response: it is the server's own,
	// never the client's X-Request-Id, which two requests may share.
	rs := &responseState{s: s, q: &q, g: g, id: "resp_" + newRequestID(), created: time.Now().Unix(), reqID: ri.id}
	rs.ts = &toolStream{}
	if g.tools.parses() {
		rs.ts.f = g.tools.format
	}
	store := q.Store == nil || *q.Store
	var (
		res  sched.Result
		text string
		ok   bool
	)
	if q.Stream != nil && *q.Stream {
		res, text, ok = rs.stream(w, r, task)
	} else {
		var evs []sched.Event
		evs, res, ok = s.collect(w, r, task)
		if ok {
			text = eventsText(evs)
			rs.whole(text)
		}
	}
	if !ok {
		return
	}
	obj := rs.object(res, "completed")
	if store {
		body, _ := marshal(obj)
		msgs := append(conv, rs.assistantTurns(text)...)
		rec := &respstore.Record{ID: rs.id, Created: time.Unix(rs.created, 0).UTC(), Messages: fromTemplate(msgs), Response: body}
		if err := s.responses.Put(ri.tenant, rec); err != nil {
			ri.log.Error("storing a response failed", "response", rs.id, "err", err)
		}
	}
	if rs.sw != nil {
		// The terminal event names the status: response.completed or
		// response.incomplete, as OpenAI's stream ends.
		rs.event("response."+obj.Status, map[string]any{"response": obj})
		return
	}
	writeJSON(w, http.StatusOK, obj)
}

// responsesGen checks a Responses request and builds its generation: the
// prompt renders the stored conversation of previous_response_id (the
// tenant's only), the input and the instructions. It returns the
// conversation without the instructions, for storing.
func (s *Server) responsesGen(tenant string, q *responsesRequest) (*genReq, []template.Message, *apiError) {
	if e := s.checkModel(q.Model); e != nil {
		return nil, nil, e
	}
	if e := q.unsupported(); e != nil {
		return nil, nil, e
	}
	p, e := q.params(s.model.tok.VocabSize())
	if e != nil {
		return nil, nil, e
	}
	g := &genReq{promptArg: "input", sampling: p, seed: q.Seed, logprobs: -1, cacheSalt: q.CacheSalt, parallel: q.ParallelToolCalls}
	if q.MaxOutputTokens != nil {
		if g.maxTokens = *q.MaxOutputTokens; g.maxTokens < 1 {
			return nil, nil, badRequest("invalid_value", "max_output_tokens", "max_output_tokens is %d; want at least 1", g.maxTokens)
		}
	}
	var history []template.Message
	if q.PreviousResponseID != "" {
		rec, err := s.responses.Get(tenant, q.PreviousResponseID)
		if err != nil {
			if errors.Is(err, respstore.ErrNotFound) {
				return nil, nil, &apiError{Status: 404, Type: typeNotFound, Code: "previous_response_not_found", Param: "previous_response_id",
					Message: fmt.Sprintf("previous_response_id: no stored response %q", q.PreviousResponseID)}
			}
			return nil, nil, &apiError{Status: 500, Type: typeServer, Code: "internal_error", Message: err.Error()}
		}
		history = toTemplate(rec.Messages)
	}
	input, e := q.inputMessages()
	if e != nil {
		return nil, nil, e
	}
	conv := append(history, input...)
	tools, e := responsesTools(q.Tools)
	if e != nil {
		return nil, nil, e
	}
	render := conv
	if q.Instructions != nil && *q.Instructions != "" {
		render = append([]template.Message{{Role: "system", Content: *q.Instructions}}, conv...)
	}
	if e := s.toolPrompt(g, render, tools, q.ToolChoice, "input"); e != nil {
		return nil, nil, chatToolParam(e)
	}
	return g, conv, nil
}

// responseState builds a response's output, whole or as stream events.
type responseState struct {
	s       *Server
	q       *responsesRequest
	g       *genReq
	id      string
	reqID   string
	created int64
	ts      *toolStream
	output  []any
	msg     *messageItem // the open message item, if any
	msgAt   int          // its output index
	msgs    int          // message items opened so far
	calls   int
	open    map[int]int // output index of each call still open, by call index
	sw      *streamWriter
	seq     int
}

// addText appends text to the open message item, opening one first when
// none is (at the start, or after a call: text after a call is a message
// of its own, after the call).
func (rs *responseState) addText(text string) {
	if text == "" {
		return
	}
	if rs.msg == nil {
		rs.msg = &messageItem{Type: "message", ID: rs.messageID(), Status: "in_progress", Role: "assistant", Content: []outputText{}}
		rs.msgs++
		rs.msgAt = len(rs.output)
		rs.output = append(rs.output, rs.msg)
		rs.event("response.output_item.added", map[string]any{"output_index": rs.msgAt, "item": rs.msg})
		rs.msg.Content = append(rs.msg.Content, outputText{Type: "output_text", Text: "", Annotations: []any{}})
		rs.event("response.content_part.added", map[string]any{"item_id": rs.msg.ID, "output_index": rs.msgAt, "content_index": 0,
			"part": outputText{Type: "output_text", Text: "", Annotations: []any{}}})
	}
	rs.msg.Content[0].Text += text
	rs.event("response.output_text.delta", map[string]any{"item_id": rs.msg.ID, "output_index": rs.msgAt, "content_index": 0,
		"delta": text, "logprobs": []any{}})
}

// messageID is the id of the next message item: "msg_" and the request
// ID for the first, with "_2", "_3", ... for later ones.
func (rs *responseState) messageID() string {
	if rs.msgs == 0 {
		return "msg_" + rs.reqID
	}
	return fmt.Sprintf("msg_%s_%d", rs.reqID, rs.msgs+1)
}

// addCalls appends whole function call items.
func (rs *responseState) addCalls(calls []toolCall) {
	for _, c := range calls {
		k := rs.calls
		if rs.startCall(k, c.Name) {
			rs.callArgs(k, c.Arguments)
			rs.endCall(k, c)
		}
	}
}

// startCall opens function call item k, after closing the message item
// before it; it returns false when parallel_tool_calls: false drops it.
func (rs *responseState) startCall(k int, name string) bool {
	if k > 0 && !rs.g.parallelCalls() {
		return false
	}
	rs.closeMessage("completed")
	callID := toolCallID(rs.reqID, 0, k)
	item := &functionCallItem{Type: "function_call", ID: "fc_" + strings.TrimPrefix(callID, "call_"), CallID: callID,
		Name: name, Arguments: "", Status: "in_progress"}
	if rs.open == nil {
		rs.open = map[int]int{}
	}
	rs.open[k] = len(rs.output)
	rs.output = append(rs.output, item)
	rs.calls++
	rs.event("response.output_item.added", map[string]any{"output_index": rs.open[k], "item": item})
	return true
}

// callArgs adds a piece of call k's arguments.
func (rs *responseState) callArgs(k int, args string) {
	at, ok := rs.open[k]
	if !ok {
		return
	}
	item := rs.output[at].(*functionCallItem)
	item.Arguments += args
	rs.event("response.function_call_arguments.delta", map[string]any{"item_id": item.ID, "output_index": at, "delta": args})
}

// endCall finishes call k as c (incomplete when it was cut short).
func (rs *responseState) endCall(k int, c toolCall) {
	at, ok := rs.open[k]
	if !ok {
		return
	}
	delete(rs.open, k)
	item := rs.output[at].(*functionCallItem)
	item.Arguments, item.Status = c.Arguments, "completed"
	if c.Partial {
		item.Status = "incomplete"
	}
	rs.event("response.function_call_arguments.done", map[string]any{"item_id": item.ID, "output_index": at, "name": c.Name, "arguments": c.Arguments})
	rs.event("response.output_item.done", map[string]any{"output_index": at, "item": item})
}

// whole builds the output of a whole reply from the pieces a stream of it
// releases, in the same order (so text after a call follows it here too).
func (rs *responseState) whole(text string) {
	rs.ts.record = true
	rs.ts.write(text)
	rs.ts.flush()
	rs.feed(rs.ts.drain())
}

// feed releases a stream's pieces, in order.
func (rs *responseState) feed(pieces []streamPiece) {
	for _, p := range pieces {
		switch {
		case p.Call != nil && !p.Streamed:
			rs.addCalls([]toolCall{*p.Call})
		case p.Call != nil:
			rs.endCall(p.Index, *p.Call)
		case p.Name != "":
			rs.startCall(p.Index, p.Name)
		case p.Args != "":
			rs.callArgs(p.Index, p.Args)
		default:
			rs.addText(p.Text)
		}
	}
}

// assistantTurns is the response's output as the conversation's assistant
// messages, built as the same output items passed back as input are: a
// message item's text, and its function calls attached to it (or to an
// assistant message of their own), so a later previous_response_id renders
// what a client that sends the items back renders. An output whose calls
// are incomplete (arguments that are not a JSON object) is stored as the
// model's text.
func (rs *responseState) assistantTurns(text string) []template.Message {
	var out []template.Message
	for _, it := range rs.output {
		switch v := it.(type) {
		case *messageItem:
			t := ""
			if len(v.Content) > 0 {
				t = v.Content[0].Text
			}
			out = append(out, template.Message{Role: "assistant", Content: t})
		case *functionCallItem:
			args, ok := argumentsObject(json.RawMessage(v.Arguments))
			if !ok {
				return []template.Message{{Role: "assistant", Content: text}}
			}
			call := template.ToolCall{ID: v.CallID, Name: v.Name, Arguments: args}
			if n := len(out); n > 0 {
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, call)
			} else {
				out = append(out, template.Message{Role: "assistant", NullContent: true, ToolCalls: []template.ToolCall{call}})
			}
		}
	}
	if len(out) == 0 {
		return []template.Message{{Role: "assistant", Content: text}}
	}
	return out
}

// closeMessage finishes the open message item, if any, with status
// (completed, or incomplete when the reply was cut in it); later text
// opens a new one.
func (rs *responseState) closeMessage(status string) {
	if rs.msg == nil {
		return
	}
	m := rs.msg
	rs.msg = nil
	m.Status = status
	part := m.Content[0]
	rs.event("response.output_text.done", map[string]any{"item_id": m.ID, "output_index": rs.msgAt, "content_index": 0, "text": part.Text, "logprobs": []any{}})
	rs.event("response.content_part.done", map[string]any{"item_id": m.ID, "output_index": rs.msgAt, "content_index": 0, "part": part})
	rs.event("response.output_item.done", map[string]any{"output_index": rs.msgAt, "item": m})
}

// event sends one stream event (nothing when not streaming).
func (rs *responseState) event(typ string, fields map[string]any) {
	if rs.sw == nil {
		return
	}
	fields["type"] = typ
	fields["sequence_number"] = rs.seq
	rs.seq++
	rs.sw.sendEvent(typ, fields)
}

// object is the response as it stands, with status (and, once finished,
// its usage).
func (rs *responseState) object(res sched.Result, status string) *responseObject {
	q := rs.q
	o := &responseObject{ID: rs.id, Object: "response", CreatedAt: rs.created, Status: status, Instructions: q.Instructions,
		MaxOutputTokens: q.MaxOutputTokens, Model: rs.s.model.id, Output: rs.output, ParallelToolCalls: rs.g.parallelCalls(),
		Store: q.Store == nil || *q.Store, Temperature: rs.g.sampling.Temperature, TopP: rs.g.sampling.TopP,
		Text: map[string]any{"format": map[string]any{"type": "text"}}, ToolChoice: "auto", Tools: []any{}, Truncation: "disabled",
		Metadata: q.Metadata}
	if o.Output == nil {
		o.Output = []any{}
	}
	if o.Metadata == nil {
		o.Metadata = map[string]string{}
	}
	if q.PreviousResponseID != "" {
		o.PreviousResponseID = &q.PreviousResponseID
	}
	if q.User != "" {
		o.User = &q.User
	}
	if isSet(q.ToolChoice) {
		o.ToolChoice = json.RawMessage(q.ToolChoice)
	} else if !rs.g.tools.parses() {
		o.ToolChoice = "none"
	}
	if isSet(q.Tools) {
		o.Tools = json.RawMessage(q.Tools)
	}
	if status != "in_progress" {
		if res.Finish == sched.FinishLength {
			o.Status = "incomplete"
			o.IncompleteDetails = map[string]any{"reason": "max_output_tokens"}
		}
		rs.closeMessage(o.Status) // the open message is the last item: the one cut short
		o.Usage = &responsesUsage{InputTokens: res.PromptTokens, InputTokensDetails: promptDetails{CachedTokens: res.CachedTokens},
			OutputTokens: len(res.Generated), OutputTokensDetails: map[string]int{"reasoning_tokens": 0},
			TotalTokens: res.PromptTokens + len(res.Generated)}
	}
	return o
}

// stream runs task as Responses stream events; it returns the result and
// the whole output text.
func (rs *responseState) stream(w http.ResponseWriter, r *http.Request, task *sched.Task) (sched.Result, string, bool) {
	rs.sw = newStream(w, true)
	rs.ts.record = true
	rs.event("response.created", map[string]any{"response": rs.object(sched.Result{}, "in_progress")})
	rs.event("response.in_progress", map[string]any{"response": rs.object(sched.Result{}, "in_progress")})
	var all strings.Builder
	ok := rs.s.drive(r, task, func(evs []sched.Event) error {
		text := eventsText(evs)
		all.WriteString(text)
		rs.ts.write(text)
		rs.feed(rs.ts.drain())
		return rs.sw.err
	})
	if !ok {
		return sched.Result{}, "", false
	}
	res, e := rs.s.finished(r, task)
	if e != nil {
		rs.event("error", map[string]any{"code": e.Code, "message": e.Message, "param": nil})
		return res, "", false
	}
	rs.ts.flush()
	rs.feed(rs.ts.drain())
	return res, all.String(), true
}

// sendEvent writes one named SSE event ("event: name" and its data).
func (sw *streamWriter) sendEvent(name string, v any) error {
	if sw.err != nil {
		return sw.err
	}
	sw.start()
	b, err := marshal(v)
	if err == nil {
		_, err = fmt.Fprintf(sw.w, "event: %s\ndata: %s\n\n", name, b)
	}
	if err == nil {
		err = http.NewResponseController(sw.w).Flush()
	}
	sw.err = err
	return err
}

func (s *Server) handleGetResponse(w http.ResponseWriter, r *http.Request) {
	rec, err := s.responses.Get(info(r).tenant, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, responseLookupError(err, r.PathValue("id")))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(rec.Response, '\n'))
}

func (s *Server) handleDeleteResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.responses.Delete(info(r).tenant, id); err != nil {
		s.fail(w, r, responseLookupError(err, id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
}

func responseLookupError(err error, id string) *apiError {
	if errors.Is(err, respstore.ErrNotFound) {
		return &apiError{Status: 404, Type: typeNotFound, Code: "not_found", Message: fmt.Sprintf("no stored response %q", id)}
	}
	return &apiError{Status: 500, Type: typeServer, Code: "internal_error", Message: err.Error()}
}
