package serve

import (
	"encoding/json"
	"net/http"

	"github.com/muserhq/muser/infer/template"
	"github.com/muserhq/muser/serve/sched"
)

// ollamaGenerateRequest is Ollama's POST /api/generate.
type ollamaGenerateRequest struct {
	ollamaCommon
	Prompt  string  `json:"prompt"`
	System  string  `json:"system"`
	Raw     bool    `json:"raw"`
	Context []int32 `json:"context"`
	// Known and not supported yet.
	Suffix   string          `json:"suffix"`
	Template string          `json:"template"`
	Images   json.RawMessage `json:"images"`
	Width    json.RawMessage `json:"width"`
	Height   json.RawMessage `json:"height"`
	Steps    json.RawMessage `json:"steps"`
}

func (s *Server) handleOllamaGenerate(w http.ResponseWriter, r *http.Request) {
	var q ollamaGenerateRequest
	if !s.decode(w, r, &q) {
		return
	}
	var e *apiError
	switch {
	case q.Suffix != "":
		e = unsupported("suffix", "suffix (fill in the middle) is not supported yet")
	case q.Template != "":
		e = unsupported("template", "template overrides are not supported yet; the model's own chat template is used")
	case isSet(q.Images) && string(q.Images) != "[]":
		e = unsupported("images", "images are not supported yet")
	case isSet(q.Width) || isSet(q.Height) || isSet(q.Steps):
		e = unsupported("width", "image generation is not supported")
	}
	if e != nil {
		s.fail(w, r, e)
		return
	}
	g, e := s.ollamaGen(&q.ollamaCommon, "prompt")
	if e != nil {
		s.fail(w, r, e)
		return
	}
	stream := q.Stream == nil || *q.Stream
	if q.Prompt == "" && q.System == "" && len(q.Context) == 0 {
		// Ollama answers an empty prompt by loading the model.
		writeJSON(w, http.StatusOK, map[string]any{"model": q.Model, "created_at": createdAt(), "response": "",
			"done": true, "done_reason": "load"})
		return
	}
	if e := s.checkTokens(q.Context, "context"); e != nil {
		s.fail(w, r, e)
		return
	}
	var ids []int32
	if q.Raw {
		ids, e = s.tokenize(q.Prompt, len(q.Context) == 0, true, "prompt")
	} else {
		var msgs []template.Message
		if q.System != "" {
			msgs = append(msgs, template.Message{Role: "system", Content: q.System})
		}
		msgs = append(msgs, template.Message{Role: "user", Content: q.Prompt})
		ids, e = s.renderChat(msgs, "prompt")
		if e == nil && len(q.Context) > 0 && len(ids) > 0 && s.model.tok.AddBOS() && ids[0] == s.model.tok.BOS() {
			ids = ids[1:] // the context already starts the sequence
		}
	}
	if e != nil {
		s.fail(w, r, e)
		return
	}
	g.prompt = append(append([]int32{}, q.Context...), ids...)
	task := s.submit(w, r, g)
	if task == nil {
		return
	}
	defer task.Cancel()
	model := q.Model
	shown := 0 // bytes of response text sent
	s.ollamaRun(w, r, task, g, stream,
		func(text string) map[string]any {
			shown += len(text)
			return map[string]any{"model": model, "created_at": createdAt(), "response": text}
		},
		func(m map[string]any, res sched.Result) {
			m["context"] = s.generateContext(g.prompt, res, shown)
		})
}

// generateContext is /api/generate's context: the prompt and the
// generated tokens whose text the response holds, shown bytes of it. The
// end-of-generation token is left out, and so are the tokens of a stop
// string cut from the response, with the token it starts inside: a client
// that sends the context back continues from what it was shown, as with
// Ollama, whose context is the prompt and the response text.
func (s *Server) generateContext(prompt []int32, res sched.Result, shown int) []int32 {
	gen := res.Generated
	if res.EOG && len(gen) > 0 {
		gen = gen[:len(gen)-1]
	}
	if res.StopWord != "" {
		gen = s.tokensWithin(gen, shown)
	}
	return append(append(make([]int32, 0, len(prompt)+len(gen)), prompt...), gen...)
}

// tokensWithin returns the longest prefix of ids whose pieces take at
// most n bytes (the scheduler's text is their concatenation, with invalid
// UTF-8 repaired).
func (s *Server) tokensWithin(ids []int32, n int) []int32 {
	used := 0
	for i, id := range ids {
		p, _ := s.model.tok.Piece(id, false)
		if used += len(p); used > n {
			return ids[:i]
		}
	}
	return ids
}
