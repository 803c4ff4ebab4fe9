package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/muserhq/muser/infer/template"
)

// This file holds what the routes share about tools: the definitions a
// request gives, tool_choice, the calls in a conversation's history, and
// rendering them through the chat template.

// toolDef is one function tool of a request, validated.
type toolDef struct {
	Name string
	// Parameters is the JSON schema of its arguments ({} when absent).
	Parameters json.RawMessage
	// noParams is set when the tool gave no parameters.
	noParams bool
	// raw is the definition as the template sees it, in OpenAI's
	// {"type": "function", "function": {...}} form with the client's key
	// order.
	raw json.RawMessage
}

// chatTool is OpenAI's (and Ollama's) tool definition.
type chatTool struct {
	Type     string        `json:"type"`
	Function *toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// maxToolName bounds a function name (OpenAI allows 64 characters).
const maxToolName = 64

// checkToolName refuses a missing or malformed function name: at most 64
// of letters, digits, "_" and "-" (OpenAI's rule) and ".".
func checkToolName(name, param string) *apiError {
	if name == "" {
		return badRequest("invalid_value", param, "%s is missing; every tool needs a name", param)
	}
	if len(name) > maxToolName {
		return badRequest("invalid_value", param, "%s is %d characters; at most %d are allowed", param, len(name), maxToolName)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return badRequest("invalid_value", param, "%s %q holds %q; want letters, digits, '_', '-' or '.'", param, name, c)
		}
	}
	return nil
}

// parseTools validates a tools array (param names the field). Nil raw or
// null gives no tools.
func parseTools(raw json.RawMessage, param string) ([]toolDef, *apiError) {
	if !isSet(raw) {
		return nil, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, badRequest("invalid_type", param, "%s must be an array of tools", param)
	}
	out := make([]toolDef, 0, len(elems))
	seen := map[string]bool{}
	for i, el := range elems {
		p := fmt.Sprintf("%s[%d]", param, i)
		var t chatTool
		if err := decodeStrict(el, &t); err != nil {
			return nil, badRequest("invalid_value", p, "%s: %v", p, err)
		}
		if t.Type != "function" {
			return nil, badRequest("invalid_value", p+".type", "%s.type is %q; want \"function\"", p, t.Type)
		}
		if t.Function == nil {
			return nil, badRequest("invalid_value", p+".function", "%s.function is missing", p)
		}
		if e := checkToolName(t.Function.Name, p+".function.name"); e != nil {
			return nil, e
		}
		if seen[t.Function.Name] {
			return nil, badRequest("invalid_value", p+".function.name", "%s.function.name %q names an earlier tool too", p, t.Function.Name)
		}
		seen[t.Function.Name] = true
		params := t.Function.Parameters
		noParams := !isSet(params)
		if noParams {
			params = json.RawMessage(`{}`)
		} else if bytes.TrimSpace(params)[0] != '{' {
			return nil, badRequest("invalid_value", p+".function.parameters", "%s.function.parameters must be a JSON schema object", p)
		}
		out = append(out, toolDef{Name: t.Function.Name, Parameters: params, noParams: noParams, raw: el})
	}
	return out, nil
}

// toolMode is what tool_choice asks.
type toolMode uint8

const (
	toolAuto     toolMode = iota // the model may call tools
	toolNone                     // the model must not: replies are text
	toolRequired                 // the model must call at least one tool
	toolNamed                    // the model must call the named tool
)

// toolChoice is a parsed tool_choice.
type toolChoice struct {
	Mode toolMode
	Name string // for toolNamed
}

// parseToolChoice reads OpenAI's tool_choice: "none", "auto", "required"
// or {"type": "function", "function": {"name": ...}} (the Responses API's
// {"type": "function", "name": ...} too). Without tools only "none" and
// "auto" are allowed.
func parseToolChoice(raw json.RawMessage, tools []toolDef, param string) (toolChoice, *apiError) {
	if !isSet(raw) {
		if len(tools) == 0 {
			return toolChoice{Mode: toolNone}, nil
		}
		return toolChoice{Mode: toolAuto}, nil
	}
	var c toolChoice
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "none":
			return toolChoice{Mode: toolNone}, nil
		case "auto":
			c.Mode = toolAuto
		case "required":
			c.Mode = toolRequired
		default:
			return c, badRequest("invalid_value", param, "%s is %q; want \"none\", \"auto\", \"required\" or a function", param, s)
		}
	} else {
		var o struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := decodeStrict(raw, &o); err != nil {
			return c, badRequest("invalid_value", param, "%s: %v", param, err)
		}
		if o.Type != "function" {
			return c, badRequest("invalid_value", param+".type", "%s.type is %q; want \"function\"", param, o.Type)
		}
		name, np := o.Name, param+".name"
		if o.Function != nil {
			name, np = o.Function.Name, param+".function.name"
		}
		if name == "" {
			return c, badRequest("invalid_value", np, "%s is missing", np)
		}
		c = toolChoice{Mode: toolNamed, Name: name}
		found := false
		for _, t := range tools {
			found = found || t.Name == name
		}
		if !found {
			return c, badRequest("invalid_value", np, "%s %q is not one of the request's tools", np, name)
		}
	}
	if len(tools) == 0 {
		if c.Mode == toolAuto {
			return toolChoice{Mode: toolNone}, nil
		}
		return c, badRequest("invalid_value", param, "%s asks for a tool call but tools is empty", param)
	}
	return c, nil
}

// toolSet is a request's tools as the handlers use them.
type toolSet struct {
	defs   []toolDef
	choice toolChoice
	format toolFormat
}

// parses reports whether replies are parsed for calls.
func (ts *toolSet) parses() bool {
	return ts != nil && len(ts.defs) > 0 && ts.choice.Mode != toolNone && ts.format != toolFormatNone
}

// wireCall is a call in OpenAI's wire form, in a request's history.
type wireCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Index     *int            `json:"index"` // Ollama's; ignored
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// parseWireCalls reads an assistant message's tool_calls (param names the
// field). Arguments are a JSON string holding an object (OpenAI) or an
// object (Ollama).
func parseWireCalls(raw json.RawMessage, param string) ([]template.ToolCall, *apiError) {
	if !isSet(raw) {
		return nil, nil
	}
	var calls []wireCall
	if err := decodeStrict(raw, &calls); err != nil {
		return nil, badRequest("invalid_value", param, "%s: %v", param, err)
	}
	out := make([]template.ToolCall, 0, len(calls))
	for i, c := range calls {
		p := fmt.Sprintf("%s[%d]", param, i)
		if c.Type != "" && c.Type != "function" {
			return nil, badRequest("invalid_value", p+".type", "%s.type is %q; want \"function\"", p, c.Type)
		}
		if e := checkToolName(c.Function.Name, p+".function.name"); e != nil {
			return nil, e
		}
		args, ok := argumentsObject(c.Function.Arguments)
		if !isSet(c.Function.Arguments) {
			args, ok = json.RawMessage(`{}`), true
		}
		if !ok {
			return nil, badRequest("invalid_value", p+".function.arguments", "%s.function.arguments must be a JSON object (or a string holding one)", p)
		}
		out = append(out, template.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
	}
	return out, nil
}

// hermesPreamble introduces the tools to a ChatML model whose template
// does not render them itself (muser's embedded model's does not).
const hermesPreamble = "# Tools\n\nYou may call one or more of the functions below. Their signatures are in <tools></tools>:\n<tools>\n%s\n</tools>\n\n" +
	"To call a function, reply with a JSON object of its name and arguments inside <tool_call></tool_call> tags:\n" +
	"<tool_call>\n{\"name\": <function-name>, \"arguments\": <arguments-object>}\n</tool_call>"

// hermesCallText writes calls as a Hermes model writes them.
func hermesCallText(calls []template.ToolCall) string {
	var b strings.Builder
	for i, c := range calls {
		if i > 0 {
			b.WriteString("\n")
		}
		args, _ := c.Arguments.(json.RawMessage)
		fmt.Fprintf(&b, "%s\n{\"name\": %q, \"arguments\": %s}\n%s", hermesOpen, c.Name, args, hermesClose)
	}
	return b.String()
}

// toolMessages adapts a conversation with tools to a template that does
// not know them: for a Hermes-format template that never reads tools, the
// definitions go into a system message (the first, or a new one); for one
// that never reads tool_calls, an assistant's calls become its content as
// the model writes them. Other templates get the conversation as is.
func toolMessages(src string, f toolFormat, msgs []template.Message, tools []toolDef) []template.Message {
	if f != toolFormatHermes {
		return msgs
	}
	out := make([]template.Message, 0, len(msgs)+1)
	if len(tools) > 0 && !strings.Contains(src, "tools") {
		var defs []string
		for _, t := range tools {
			var b bytes.Buffer
			if json.Compact(&b, t.raw) == nil {
				defs = append(defs, b.String())
			}
		}
		pre := fmt.Sprintf(hermesPreamble, strings.Join(defs, "\n"))
		if len(msgs) > 0 && msgs[0].Role == "system" {
			m := msgs[0]
			m.Content = m.Content + "\n\n" + pre
			out = append(out, m)
			msgs = msgs[1:]
		} else {
			out = append(out, template.Message{Role: "system", Content: pre})
		}
	}
	callsKnown := strings.Contains(src, "tool_calls")
	for _, m := range msgs {
		if len(m.ToolCalls) > 0 && !callsKnown {
			text := hermesCallText(m.ToolCalls)
			if m.Content != "" && !m.NullContent {
				text = m.Content + "\n" + text
			}
			m.Content, m.NullContent, m.ToolCalls = text, false, nil
		}
		out = append(out, m)
	}
	return out
}

// templateTools is tools as the template's tools variable: None when
// there are none (an empty tools array too, so a request with "tools": []
// renders as one without tools).
func templateTools(tools []toolDef) []any {
	if len(tools) == 0 {
		return nil
	}
	out := make([]any, len(tools))
	for i, t := range tools {
		out[i] = t.raw
	}
	return out
}

// hasToolCalls reports whether a message of msgs calls tools.
func hasToolCalls(msgs []template.Message) bool {
	for _, m := range msgs {
		if len(m.ToolCalls) > 0 {
			return true
		}
	}
	return false
}

// requestTools reads a request's tools and tool_choice (in the chat
// form). A request with tools needs a template with a tool-call format
// (detectToolFormat).
func (s *Server) requestTools(tools, choice json.RawMessage) (*toolSet, *apiError) {
	defs, e := parseTools(tools, "tools")
	if e != nil {
		return nil, e
	}
	c, e := parseToolChoice(choice, defs, "tool_choice")
	if e != nil {
		return nil, e
	}
	ts := &toolSet{defs: defs, choice: c, format: detectToolFormat(s.model.tmpl.Source())}
	if len(defs) > 0 && ts.format == toolFormatNone && c.Mode != toolNone {
		return nil, unsupported("tools", "the model's chat template defines no tool-call format muser knows (Hermes <tool_call>, Llama 3 JSON, Mistral [TOOL_CALLS])")
	}
	return ts, nil
}

// toolPrompt is what the chat routes share about tools: it reads tools
// and tool_choice into g.tools, renders msgs with them as g's prompt
// (msgsParam names the messages), and when tool_choice forces a call,
// constrains g to it (over any response_format).
func (s *Server) toolPrompt(g *genReq, msgs []template.Message, tools, choice json.RawMessage, msgsParam string) *apiError {
	var e *apiError
	if g.tools, e = s.requestTools(tools, choice); e != nil {
		return e
	}
	if g.prompt, e = s.renderChatTools(msgs, g.tools.defs, msgsParam); e != nil {
		return e
	}
	c, e := s.toolConstraint(g.tools)
	if e != nil {
		return e
	}
	if c != nil {
		g.constraint = c
	}
	return nil
}
