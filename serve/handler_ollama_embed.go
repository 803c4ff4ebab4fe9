package serve

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/muserhq/muser/infer/engine"
)

// ollamaEmbedRequest is Ollama's POST /api/embed.
type ollamaEmbedRequest struct {
	Model      string          `json:"model"`
	Input      json.RawMessage `json:"input"`
	Truncate   *bool           `json:"truncate"`
	Dimensions *int            `json:"dimensions"`
	KeepAlive  json.RawMessage `json:"keep_alive"`
	Options    *ollamaOptions  `json:"options"`
}

// handleOllamaEmbed is Ollama's POST /api/embed: L2-normalized pooled
// embeddings, inputs longer than the context cut to it unless truncate is
// false.
func (s *Server) handleOllamaEmbed(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var q ollamaEmbedRequest
	if !s.decode(w, r, &q) {
		return
	}
	if e := s.checkModel(q.Model); e != nil {
		s.fail(w, r, e)
		return
	}
	if e := s.checkDimensions(q.Dimensions); e != nil {
		s.fail(w, r, e)
		return
	}
	if s.pooling == engine.PoolingNone {
		s.fail(w, r, noPooling("input"))
		return
	}
	inputs, e := s.parseEmbedInputs(q.Input, "input")
	if e != nil {
		s.fail(w, r, e)
		return
	}
	res := s.embed(w, r, inputs, embedOptions{pooling: s.pooling, normalize: true, truncate: q.Truncate == nil || *q.Truncate, param: "input"})
	if res == nil {
		return
	}
	vecs := make([][]float32, len(res))
	total := 0
	for i, x := range res {
		vecs[i] = x.vec
		total += x.n
	}
	writeJSON(w, http.StatusOK, map[string]any{"model": s.model.ollamaName(), "embeddings": vecs,
		"total_duration": time.Since(start).Nanoseconds(), "load_duration": 0, "prompt_eval_count": total})
}

// ollamaEmbeddingsRequest is Ollama's legacy POST /api/embeddings.
type ollamaEmbeddingsRequest struct {
	Model     string          `json:"model"`
	Prompt    *string         `json:"prompt"`
	KeepAlive json.RawMessage `json:"keep_alive"`
	Options   *ollamaOptions  `json:"options"`
}

// handleOllamaEmbeddings is Ollama's legacy POST /api/embeddings: one
// pooled embedding, not normalized (as Ollama's).
func (s *Server) handleOllamaEmbeddings(w http.ResponseWriter, r *http.Request) {
	var q ollamaEmbeddingsRequest
	if !s.decode(w, r, &q) {
		return
	}
	if e := s.checkModel(q.Model); e != nil {
		s.fail(w, r, e)
		return
	}
	if q.Prompt == nil || *q.Prompt == "" {
		s.fail(w, r, badRequest("invalid_value", "prompt", "prompt is missing or empty"))
		return
	}
	if s.pooling == engine.PoolingNone {
		s.fail(w, r, noPooling("prompt"))
		return
	}
	ids, e := s.tokenize(*q.Prompt, true, true, "prompt")
	if e != nil {
		s.fail(w, r, e)
		return
	}
	res := s.embed(w, r, [][]int32{ids}, embedOptions{pooling: s.pooling, param: "prompt"})
	if res == nil {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"embedding": res[0].vec})
}
