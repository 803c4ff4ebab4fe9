package serve

import (
	"errors"
	"net/http"

	"github.com/muserhq/muser/infer/template"
)

// applyTemplateRequest is llama-server's POST /apply-template.
type applyTemplateRequest struct {
	Messages []chatMessage `json:"messages"`
	Model    string        `json:"model"`
}

// handleApplyTemplate is llama-server's POST /apply-template: the prompt
// text the model's chat template makes of the messages, with the
// assistant's generation prompt, as /v1/chat/completions would compute it
// (before tokenization, which adds BOS unless the text starts with it).
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
	text, err := s.model.tmpl.Render(template.Context{
		Messages:            msgs,
		AddGenerationPrompt: true,
		BOSToken:            s.model.bos,
		EOSToken:            s.model.eos,
	})
	if err != nil {
		var te *template.Error
		if errors.As(err, &te) && errors.Is(err, template.ErrRaised) {
			s.fail(w, r, badRequest("invalid_value", "messages", "the model's chat template refused the messages: %s", te.Msg))
			return
		}
		s.fail(w, r, badRequest("invalid_value", "messages", "rendering the chat template: %v", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompt": text})
}
