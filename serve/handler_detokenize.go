package serve

import (
	"fmt"
	"net/http"
	"strings"
)

// detokenizeRequest is llama.cpp's POST /detokenize.
type detokenizeRequest struct {
	Tokens []int32 `json:"tokens"`
}

// handleDetokenize answers as llama.cpp's server does: the tokens' pieces
// one after another (llama_token_to_piece with lstrip 0 and special
// tokens rendered), so SentencePiece's leading space stays, control tokens
// show as their text, and no clean-up of spaces is applied. Bytes that are
// not valid UTF-8 become U+FFFD.
func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	var q detokenizeRequest
	if !s.decode(w, r, &q) {
		return
	}
	if e := s.checkTokens(q.Tokens, "tokens"); e != nil {
		s.fail(w, r, e)
		return
	}
	var b strings.Builder
	for i, id := range q.Tokens {
		p, err := s.model.tok.Piece(id, true)
		if err != nil {
			s.fail(w, r, badRequest("invalid_value", fmt.Sprintf("tokens[%d]", i), "%v", err))
			return
		}
		b.WriteString(p)
	}
	writeJSON(w, http.StatusOK, map[string]any{"content": strings.ToValidUTF8(b.String(), "\uFFFD")})
}
