package serve

import "net/http"

// handleHealth is llama.cpp's GET /health. The model is loaded before the
// server listens, so a server that answers is ready.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}
