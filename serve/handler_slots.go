package serve

import "net/http"

// handleSlots is llama.cpp's GET /slots: each slot's state. The request
// ID and tenant of a slot serving another tenant are not shown.
func (s *Server) handleSlots(w http.ResponseWriter, r *http.Request) {
	me := info(r).tenant
	infos := s.sched.SlotInfos()
	out := make([]map[string]any, len(infos))
	for i, in := range infos {
		m := map[string]any{
			"id": in.ID, "n_ctx": in.Ctx, "is_processing": in.Processing(), "state": in.State,
			"n_tokens": in.Tokens, "n_prompt_tokens": in.PromptTokens, "n_cached_tokens": in.CachedTokens,
			"n_decoded": in.Generated,
		}
		if in.Tenant == me && in.RequestID != "" {
			m["request_id"] = in.RequestID
		}
		out[i] = m
	}
	writeJSON(w, http.StatusOK, out)
}
