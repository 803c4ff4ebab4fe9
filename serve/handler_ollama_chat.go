package serve

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/muserhq/muser/infer/template"
	"github.com/muserhq/muser/serve/sched"
)

// ollamaChatRequest is Ollama's POST /api/chat.
type ollamaChatRequest struct {
	ollamaCommon
	Messages []ollamaMessage `json:"messages"`
	// Tools are function tools, as in OpenAI's chat completions.
	Tools json.RawMessage `json:"tools"`
	// ToolChoice is a muser extension (Ollama has none): OpenAI's
	// tool_choice, to force a call.
	ToolChoice json.RawMessage `json:"tool_choice"`
}

type ollamaMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ToolCalls are an assistant message's calls (arguments as objects);
	// ToolName names the tool a tool message answers.
	ToolCalls json.RawMessage `json:"tool_calls"`
	ToolName  string          `json:"tool_name"`
	// Known and not supported yet.
	Thinking string          `json:"thinking"`
	Images   json.RawMessage `json:"images"`
}

func (s *Server) handleOllamaChat(w http.ResponseWriter, r *http.Request) {
	var q ollamaChatRequest
	if !s.decode(w, r, &q) {
		return
	}
	g, e := s.ollamaGen(&q.ollamaCommon, "messages")
	if e != nil {
		s.fail(w, r, e)
		return
	}
	if len(q.Messages) == 0 {
		writeJSON(w, http.StatusOK, map[string]any{"model": q.Model, "created_at": createdAt(),
			"message": map[string]any{"role": "assistant", "content": ""}, "done": true, "done_reason": "load"})
		return
	}
	msgs := make([]template.Message, len(q.Messages))
	for i, m := range q.Messages {
		p := fmt.Sprintf("messages[%d]", i)
		switch {
		case isSet(m.Images) && string(m.Images) != "[]":
			e = unsupported(p+".images", "images are not supported yet")
		case m.Thinking != "":
			e = unsupported(p+".thinking", "")
		case m.Role != "system" && m.Role != "user" && m.Role != "assistant" && m.Role != "tool":
			e = badRequest("invalid_value", p+".role", "role %q is not one of system, user, assistant, tool", m.Role)
		case m.ToolName != "" && m.Role != "tool":
			e = badRequest("invalid_value", p+".tool_name", "%s.tool_name is only allowed on a tool message", p)
		case isSet(m.ToolCalls) && string(m.ToolCalls) != "[]" && m.Role != "assistant":
			e = badRequest("invalid_value", p+".tool_calls", "%s.tool_calls is only allowed on an assistant message", p)
		}
		if e != nil {
			s.fail(w, r, e)
			return
		}
		msgs[i] = template.Message{Role: m.Role, Content: m.Content, Name: m.ToolName}
		if msgs[i].ToolCalls, e = parseWireCalls(m.ToolCalls, p+".tool_calls"); e != nil {
			s.fail(w, r, e)
			return
		}
	}
	if e := s.toolPrompt(g, msgs, q.Tools, q.ToolChoice, "messages"); e != nil {
		s.fail(w, r, e)
		return
	}
	task := s.submit(w, r, g)
	if task == nil {
		return
	}
	defer task.Cancel()
	model := q.Model
	ts := &toolStream{}
	if g.tools.parses() {
		ts.f = g.tools.format
	}
	ncalls := 0
	// addCalls puts calls in msg, in Ollama's form (arguments as objects).
	addCalls := func(msg map[string]any, calls []toolCall) {
		var out []any
		if prev, ok := msg["tool_calls"].([]any); ok {
			out = prev
		}
		for _, c := range calls {
			if c.Partial {
				continue // a call cut short has no arguments object to give
			}
			out = append(out, map[string]any{"id": toolCallID(info(r).id, 0, ncalls),
				"function": map[string]any{"index": ncalls, "name": c.Name, "arguments": json.RawMessage(c.Arguments)}})
			ncalls++
		}
		if len(out) > 0 {
			msg["tool_calls"] = out
		}
	}
	s.ollamaRun(w, r, task, g, q.Stream == nil || *q.Stream,
		func(text string) map[string]any {
			content, calls := ts.write(text)
			msg := map[string]any{"role": "assistant", "content": content}
			addCalls(msg, calls)
			return map[string]any{"model": model, "created_at": createdAt(), "message": msg}
		},
		func(m map[string]any, _ sched.Result) {
			content, calls := ts.flush()
			msg := m["message"].(map[string]any)
			msg["content"] = msg["content"].(string) + content
			addCalls(msg, calls)
		})
}
