package serve

import (
	"fmt"
	"net/http"
)

func (s *Server) modelObject() map[string]any {
	return map[string]any{"id": s.model.id, "object": "model", "created": s.started.Unix(), "owned_by": "muser"}
}

// handleModels is GET /v1/models.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{s.modelObject()}})
}

// handleModel is GET /v1/models/{id}.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == "" || !s.model.knows(id) {
		s.fail(w, r, &apiError{Status: 404, Type: typeNotFound, Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("the model %q does not exist; this server serves %q", id, s.model.id)})
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}
