package serve

import (
	"net/http"
	"os"
	"time"
)

func (s *Server) ollamaDetails() map[string]any {
	return map[string]any{
		"parent_model": "", "format": "gguf", "family": s.model.arch(), "families": []string{s.model.arch()},
		"parameter_size": s.model.paramSize(), "quantization_level": s.model.quant,
	}
}

func (s *Server) modifiedAt() string {
	t := s.started
	if s.model.path != "" {
		if fi, err := os.Stat(s.model.path); err == nil {
			t = fi.ModTime()
		}
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// handleOllamaTags is Ollama's GET /api/tags: the served model.
func (s *Server) handleOllamaTags(w http.ResponseWriter, r *http.Request) {
	name := s.model.ollamaName()
	writeJSON(w, http.StatusOK, map[string]any{"models": []any{map[string]any{
		"name": name, "model": name, "modified_at": s.modifiedAt(), "size": s.model.size,
		"digest": s.identity.Model.String(), "details": s.ollamaDetails(),
	}}})
}
