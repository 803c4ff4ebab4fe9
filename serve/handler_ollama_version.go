package serve

import "net/http"

// handleOllamaVersion is Ollama's GET /api/version: muser's version.
func (s *Server) handleOllamaVersion(w http.ResponseWriter, r *http.Request) {
	v := s.opts.Version
	if v == "" {
		v = "0.0.0"
	}
	writeJSON(w, http.StatusOK, map[string]any{"version": v})
}
