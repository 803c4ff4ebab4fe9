package serve

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// handleOllamaPs is Ollama's GET /api/ps: the loaded models. muser serves
// one model, loaded for the server's life: expires_at is as far off as
// Ollama reports for keep_alive -1, size is the model file's size, and
// size_vram is 0 on the CPU (the size when a GPU computes it).
func (s *Server) handleOllamaPs(w http.ResponseWriter, r *http.Request) {
	name := s.model.ollamaName()
	vram := int64(0)
	if !strings.HasPrefix(s.model.eng.Device().Name(), "cpu") {
		vram = s.model.size
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": []any{map[string]any{
		"name": name, "model": name, "size": s.model.size, "digest": s.identity.Model.String(),
		"details": s.ollamaDetails(), "expires_at": time.Now().Add(math.MaxInt64).UTC().Format(time.RFC3339Nano),
		"size_vram": vram, "context_length": s.sched.Ctx(),
	}}})
}
