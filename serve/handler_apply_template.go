package serve

import "net/http"

// applyTemplateRequest is llama-server's POST /apply-template.
type applyTemplateRequest struct {
	Messages []chatMessage `json:"messages"`
	Model    string        `json:"model"`
}

// handleApplyTemplate is llama-server's POST /apply-template: the prompt
// text the model's chat template makes of the messages, with the
// assistant's generation prompt, as /v1/chat/completions computes it
// (chatText: assistant tool calls included; before tokenization, which
// adds BOS unless the text starts with it).
func (s *Server) handleApplyTemplate(w http.ResponseWriter, r *http.Request) {
	var q applyTemplateRequest
	if !s.decode(w, r, &q) {
		return
	}
	if e := s.checkModel(q.Model); e != nil {
		s.fail(w, r, e)
		return
	}
	msgs, e := (&chatRequest{Messages: q.Messages}).messages()
	if e != nil {
		s.fail(w, r, e)
		return
	}
	text, e := s.chatText(msgs, nil, "messages")
	if e != nil {
		s.fail(w, r, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompt": text})
}
