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
	// Known and not supported yet.
	Tools json.RawMessage `json:"tools"`
}

type ollamaMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Known and not supported yet.
	Thinking  string          `json:"thinking"`
	Images    json.RawMessage `json:"images"`
	ToolCalls json.RawMessage `json:"tool_calls"`
	ToolName  string          `json:"tool_name"`
}

func (s *Server) handleOllamaChat(w http.ResponseWriter, r *http.Request) {
	var q ollamaChatRequest
	if !s.decode(w, r, &q) {
		return
	}
	if isSet(q.Tools) && string(q.Tools) != "[]" {
		s.fail(w, r, unsupported("tools", ""))
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
		case isSet(m.ToolCalls) && string(m.ToolCalls) != "[]":
			e = unsupported(p+".tool_calls", "")
		case m.ToolName != "":
			e = unsupported(p+".tool_name", "")
		case m.Thinking != "":
			e = unsupported(p+".thinking", "")
		case m.Role != "system" && m.Role != "user" && m.Role != "assistant":
			if m.Role == "tool" {
				e = unsupported(p+".role", "role \"tool\" is not supported yet (tools are not)")
			} else {
				e = badRequest("invalid_value", p+".role", "role %q is not one of system, user, assistant", m.Role)
			}
		}
		if e != nil {
			s.fail(w, r, e)
			return
		}
		msgs[i] = template.Message{Role: m.Role, Content: m.Content}
	}
	if g.prompt, e = s.renderChat(msgs, "messages"); e != nil {
		s.fail(w, r, e)
		return
	}
	task := s.submit(w, r, g)
	if task == nil {
		return
	}
	defer task.Cancel()
	model := q.Model
	s.ollamaRun(w, r, task, g, q.Stream == nil || *q.Stream,
		func(text string) map[string]any {
			return map[string]any{"model": model, "created_at": createdAt(),
				"message": map[string]any{"role": "assistant", "content": text}}
		},
		func(map[string]any, sched.Result) {})
}
