package serve

import (
	"net/http"

	"github.com/muserhq/muser/infer/sample"
)

// handleProps is llama.cpp's GET /props: the server's settings.
func (s *Server) handleProps(w http.ResponseWriter, r *http.Request) {
	d := sample.Defaults(0)
	g := &genReq{sampling: d, maxTokens: -1}
	settings := s.generationSettings(g)
	delete(settings, "seed")
	writeJSON(w, http.StatusOK, map[string]any{
		"default_generation_settings": map[string]any{"n_ctx": s.sched.Ctx(), "params": settings},
		"total_slots":                 s.sched.Slots(),
		"model_alias":                 s.model.id,
		"model_path":                  s.model.path,
		"chat_template":               s.model.tmpl.Source(),
		"bos_token":                   s.model.bos,
		"eos_token":                   s.model.eos,
		"build_info":                  "muser " + s.opts.Version,
		"modalities":                  map[string]bool{"vision": false, "audio": false},
		"identity": map[string]any{
			"key": s.identity.Key().String(), "arch": s.identity.Arch, "quant": s.identity.Quant,
			"kv": s.identity.KV, "engine": s.identity.Engine,
		},
		"block_tokens": s.store.BlockTokens(),
	})
}
