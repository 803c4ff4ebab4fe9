package serve

import (
	"encoding/json"
	"net/http"

	"github.com/muserhq/muser/infer/engine"
)

// embeddingsRequest is OpenAI's POST /v1/embeddings.
type embeddingsRequest struct {
	Input          json.RawMessage `json:"input"`
	Model          string          `json:"model"`
	EncodingFormat *string         `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// handleEmbeddings is OpenAI's POST /v1/embeddings: one pooled,
// L2-normalized embedding per input. A model whose pooling is none is
// refused, as llama-server does.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	var q embeddingsRequest
	if !s.decode(w, r, &q) {
		return
	}
	if e := s.checkModel(q.Model); e != nil {
		s.fail(w, r, e)
		return
	}
	b64 := false
	if q.EncodingFormat != nil {
		switch *q.EncodingFormat {
		case "float":
		case "base64":
			b64 = true
		default:
			s.fail(w, r, badRequest("invalid_value", "encoding_format", "encoding_format is %q; want float or base64", *q.EncodingFormat))
			return
		}
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
	res := s.embed(w, r, inputs, embedOptions{pooling: s.pooling, normalize: true, param: "input"})
	if res == nil {
		return
	}
	data := make([]any, len(res))
	total := 0
	for i, x := range res {
		var v any = x.vec
		if b64 {
			v = float32sBase64(x.vec)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": v}
		total += x.n
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": s.model.id,
		"usage": map[string]any{"prompt_tokens": total, "total_tokens": total}})
}

// llamaEmbeddingRequest is llama-server's POST /embedding (and
// /embeddings): the input under content (or input), and the
// normalization.
type llamaEmbeddingRequest struct {
	Content        json.RawMessage `json:"content"`
	Input          json.RawMessage `json:"input"`
	EmbdNormalize  *int            `json:"embd_normalize"`
	EncodingFormat *string         `json:"encoding_format"`
	Model          string          `json:"model"`
}

// handleLlamaEmbedding is llama-server's POST /embedding and /embeddings:
// [{"index": i, "embedding": [[...]]}], one pooled vector per input
// (normalized per embd_normalize: 2, the default, Euclidean; -1 none), or
// with pooling none every token's unnormalized state.
func (s *Server) handleLlamaEmbedding(w http.ResponseWriter, r *http.Request) {
	var q llamaEmbeddingRequest
	if !s.decode(w, r, &q) {
		return
	}
	if e := s.checkModel(q.Model); e != nil {
		s.fail(w, r, e)
		return
	}
	raw, param := q.Content, "content"
	switch {
	case isSet(q.Content) && isSet(q.Input):
		s.fail(w, r, badRequest("invalid_value", "input", "give content or input, not both"))
		return
	case isSet(q.Input):
		raw, param = q.Input, "input"
	}
	normalize := true
	if q.EmbdNormalize != nil {
		switch *q.EmbdNormalize {
		case 2:
		case -1:
			normalize = false
		default:
			s.fail(w, r, unsupported("embd_normalize", "embd_normalize is %d; muser supports 2 (Euclidean, the default) and -1 (none)", *q.EmbdNormalize))
			return
		}
	}
	if q.EncodingFormat != nil && *q.EncodingFormat != "float" {
		s.fail(w, r, unsupported("encoding_format", "encoding_format is %q; this route answers float arrays (base64 is on /v1/embeddings)", *q.EncodingFormat))
		return
	}
	inputs, e := s.parseEmbedInputs(raw, param)
	if e != nil {
		s.fail(w, r, e)
		return
	}
	res := s.embed(w, r, inputs, embedOptions{pooling: s.pooling, normalize: normalize, param: param})
	if res == nil {
		return
	}
	out := make([]any, len(res))
	for i, x := range res {
		vecs := x.tokens
		if x.vec != nil {
			vecs = [][]float32{x.vec}
		}
		out[i] = map[string]any{"index": i, "embedding": vecs}
	}
	writeJSON(w, http.StatusOK, out)
}
