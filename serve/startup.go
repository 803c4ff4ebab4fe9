package serve

import (
	"log/slog"
	"net"
	"runtime"
)

// logStartup writes the one line that says how this server runs: its
// address, model and identity, slots and context, store and budget,
// access rules and limits (the effective values, defaults applied).
func (s *Server) logStartup(ln net.Listener) {
	admin := "loopback"
	if s.adminKey != "" {
		admin = "key"
	}
	access := "loopback, one tenant"
	if s.keys != nil {
		access = "api keys"
	}
	st, _ := s.store.Stats()
	s.log.Info("serving",
		slog.String("addr", ln.Addr().String()),
		slog.String("version", s.opts.Version),
		slog.String("go", runtime.Version()),
		slog.String("model", s.model.id),
		slog.String("device", s.model.eng.Device().Name()),
		slog.String("weights", s.model.eng.File().Memory().String()),
		slog.String("identity", s.identity.Key().Short()),
		slog.String("arch", s.identity.Arch),
		slog.String("quant", s.identity.Quant),
		slog.String("kv", s.identity.KV),
		slog.String("engine", s.identity.Engine),
		slog.Int("slots", s.sched.Slots()),
		slog.Int("ctx", s.sched.Ctx()),
		slog.Int("max_queue", s.maxQueue()),
		slog.Bool("slot_reuse", s.opts.SlotReuse),
		slog.Bool("kv_commit", s.opts.CommitKV),
		slog.String("store", s.store.Dir()),
		slog.Int("block_tokens", s.store.BlockTokens()),
		slog.Int("store_packs", st.Packs),
		slog.Int64("store_bytes", st.Bytes),
		slog.Int64("store_max_bytes", s.opts.StoreMaxBytes),
		slog.String("access", access),
		slog.String("admin", admin),
		slog.Int64("max_body_bytes", s.opts.MaxBodyBytes),
		slog.Duration("shutdown_grace", s.opts.ShutdownGrace),
		slog.Duration("write_timeout", max(s.opts.WriteTimeout, 0)), // 0: no bound, as --write-timeout says it
	)
}
