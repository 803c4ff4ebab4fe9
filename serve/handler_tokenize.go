package serve

import (
	"net/http"
	"unicode/utf8"

	"github.com/muserhq/muser/infer/tokenizer"
)

// tokenizeRequest is llama.cpp's POST /tokenize.
type tokenizeRequest struct {
	Content      *string `json:"content"`
	AddSpecial   bool    `json:"add_special"`
	ParseSpecial *bool   `json:"parse_special"`
	WithPieces   bool    `json:"with_pieces"`
}

// tokenPiece is one token with its text: a string when the token's bytes
// are valid UTF-8, else the bytes.
type tokenPiece struct {
	ID    int32 `json:"id"`
	Piece any   `json:"piece"`
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var q tokenizeRequest
	if !s.decode(w, r, &q) {
		return
	}
	if q.Content == nil {
		s.fail(w, r, badRequest("invalid_value", "content", "content is missing"))
		return
	}
	parse := q.ParseSpecial == nil || *q.ParseSpecial
	ids, err := s.model.tok.Encode(*q.Content, tokenizer.EncodeOptions{AddSpecial: q.AddSpecial, ParseSpecial: parse})
	if err != nil {
		s.fail(w, r, badRequest("invalid_value", "content", "tokenizing content: %v", err))
		return
	}
	if ids == nil {
		ids = []int32{}
	}
	if !q.WithPieces {
		writeJSON(w, http.StatusOK, map[string]any{"tokens": ids})
		return
	}
	pieces := make([]tokenPiece, len(ids))
	for i, id := range ids {
		p, _ := s.model.tok.Piece(id, true)
		pieces[i] = tokenPiece{ID: id, Piece: p}
		if !utf8.ValidString(p) {
			b := make([]int, len(p))
			for j := 0; j < len(p); j++ {
				b[j] = int(p[j])
			}
			pieces[i].Piece = b
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": pieces})
}
