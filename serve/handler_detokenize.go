package serve

import (
	"net/http"
	"strings"
)

// detokenizeRequest is llama.cpp's POST /detokenize.
type detokenizeRequest struct {
	Tokens []int32 `json:"tokens"`
}

func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	var q detokenizeRequest
	if !s.decode(w, r, &q) {
		return
	}
	if e := s.checkTokens(q.Tokens, "tokens"); e != nil {
		s.fail(w, r, e)
		return
	}
	text, err := s.model.tok.Decode(q.Tokens)
	if err != nil {
		s.fail(w, r, badRequest("invalid_value", "tokens", "%v", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"content": strings.ToValidUTF8(text, "\uFFFD")})
}
