package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve/adminapi"
	"github.com/muserhq/muser/serve/dashboard"
	"github.com/muserhq/muser/serve/respstore"
	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/serve/tenant"
	"github.com/muserhq/muser/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for Options fields left zero.
const (
	DefaultAddr          = "127.0.0.1:4949"
	DefaultMaxBodyBytes  = 8 << 20
	DefaultShutdownGrace = 30 * time.Second
	// DefaultWriteTimeout is how long a response write may make no
	// progress before it fails (Options.WriteTimeout).
	DefaultWriteTimeout = time.Minute
	// DefaultResponsesTTL is how long `muser serve` keeps a stored
	// Responses API response: 30 days, as OpenAI keeps them.
	DefaultResponsesTTL = 30 * 24 * time.Hour
)

// Options configure a Server. Model or ModelPath names the model; Home
// (or Store) the data directory.
type Options struct {
	// ModelPath is the GGUF file to serve. Ignored when Model is set.
	ModelPath string
	// Model is an already parsed GGUF file (the embedded default model).
	Model *gguf.File
	// ModelName names the model in the APIs (default: the file's base
	// name, else its general.name).
	ModelName string
	// Alias, when not empty, is the model's name in every API (--alias):
	// model lists and responses report it, and requests may name it (with
	// or without Ollama's ":latest"), or any of the model's own names.
	Alias string
	// Addr is where Serve's caller listens (host:port); New checks that
	// it is a loopback address unless APIKeysFile is set.
	Addr string
	// Home is the data directory: the store, and the server secret that
	// tenant salts derive from.
	Home string
	// Store, if set, is used instead of opening one under Home (the
	// caller closes it); the server secret still lives under Home.
	Store *store.Store
	// StoreNoSync opens the store without fsync (tests and benchmarks).
	StoreNoSync bool
	// ResponsesTTL is how long a stored Responses API response may be
	// continued or retrieved (respstore.Options.TTL); 0 keeps them until
	// deleted. `muser serve` defaults to DefaultResponsesTTL.
	ResponsesTTL time.Duration
	// APIKeysFile maps API keys to tenants (tenant.LoadKeys). Empty means
	// one local tenant and a loopback-only server.
	APIKeysFile string
	// Ctx is the tokens one slot holds (prompt and output); 0 means the
	// model's training context, at most sched.DefaultCtx.
	Ctx int
	// Parallel is the number of slots decoded together (default 1).
	Parallel int
	// MaxQueue is the most requests waiting for a slot before the server
	// answers 429 (default sched.DefaultMaxQueue; negative: none wait).
	MaxQueue int
	// StoreMaxBytes, when positive, is the store's byte budget, kept by gc
	// after publishes.
	StoreMaxBytes int64
	// Device computes the model; nil means the CPU engine with Threads
	// worker goroutines.
	Device engine.Device
	// Threads is the CPU engine's worker goroutines when Device is nil
	// (0: every CPU).
	Threads int
	// MapModel maps the model file at ModelPath (engine.Options.Mapped)
	// where the CPU engine would read it into resident memory (--mmap).
	MapModel bool
	// PrefillChunk and StepTokens bound prompt tokens per slot and per
	// step (sched.Config).
	PrefillChunk, StepTokens int
	// DecodeBatch is the most decode tokens per Forward call in a step of
	// decode tokens only (sched.Config.DecodeBatch; 0: its default).
	DecodeBatch int
	// SlotReuse reuses an idle slot's KV for a request of the same tenant
	// when it covers more of the prompt than the store.
	SlotReuse bool
	// CommitKV allocates and writes every slot's KV memory for Ctx tokens
	// at start (sched.Config.CommitKV, --kv-commit).
	CommitKV bool
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// ShutdownGrace is how long Serve lets in-flight requests finish after
	// its context ends before cancelling them (default
	// DefaultShutdownGrace).
	ShutdownGrace time.Duration
	// WriteTimeout bounds how long a write of a response may make no
	// progress (a client that stopped reading while keeping its
	// connection open): the write then fails, which ends the handler and
	// cancels the request's generation as a client that goes away does.
	// The deadline is renewed before each write and flush, so a long
	// stream whose client reads is never cut. 0 means
	// DefaultWriteTimeout; negative, no bound (--write-timeout 0).
	WriteTimeout time.Duration
	// Version is reported by /api/version and /props.
	Version string
	// Pooling, when not empty, overrides the model's <arch>.pooling_type
	// for embeddings: none, mean, cls or last (--pooling).
	Pooling string
	// FallbackPooling is the pooling when Pooling is empty and the model
	// declares none: muser serve sets defaultmodel.Pooling for the
	// embedded default model. Empty means none (embeddings refused but for
	// llama.cpp's per-token /embedding).
	FallbackPooling string
	// Logger receives structured logs (nil: slog.Default()).
	Logger *slog.Logger
	// OnPublish is called after each publish: the hook for replication
	// (sched.Config.OnPublish).
	OnPublish func(sched.PublishEvent)
	// TenantSecret, when not nil, is the secret tenants' cache salts
	// derive from (tenant.SecretLen bytes) instead of Home/serve.key:
	// muser serve passes tenant.ClusterSecret when the node belongs to a
	// cluster, so replicas salt every tenant alike.
	TenantSecret []byte
	// RemotePrefill is called before each restore: the hook for a
	// consumer of a prefill producer (sched.Config.RemotePrefill).
	RemotePrefill func(ctx context.Context, id pack.Identity, salt []byte, tokens []int32) error
	// Restore, when set, restores each request's prefix in place of the
	// store's Restore: the hook for the fleet tier's read-through
	// (sched.Config.Restore).
	Restore func(ctx context.Context, id pack.Identity, salt []byte, tokens []int32, put func(block int, kv []byte) error) (int, error)
	// Cluster, when set, reports the node's cluster for the dashboard's
	// Nodes tab (nil result: not in a cluster); muser serve fills it in
	// from its replication node.
	Cluster func() *dashboard.ClusterState
	// AdminKeyFile holds the admin key (LoadAdminKey): with it the admin
	// endpoint admits anyone who sends it as a bearer token; without it,
	// loopback clients only.
	AdminKeyFile string
	// AdminNodes, when set, answers GET /admin/v1/nodes with the JSON of
	// `muser node ls --json` (the node registry lives outside serve).
	AdminNodes func() ([]byte, error)
	// DraftModelPath, when set, turns on speculative decoding with this
	// GGUF draft model (the model's tokenizer; Device computes it).
	DraftModelPath string
	// DraftBlockPath, when set, turns on speculative decoding with this
	// block drafter (trained for the model: infer/blockdraft), computed
	// on Device where it runs drafters (blockdraft.Binder: the CUDA
	// device), else on the CPU with Threads workers; not with
	// DraftModelPath.
	DraftBlockPath string
	// DraftBlockOnCPU keeps the block drafter on the CPU whatever Device
	// is (--draft-block-device cpu).
	DraftBlockOnCPU bool
	// DraftLookup turns on speculative decoding by prompt lookup; with
	// DraftModelPath or DraftBlockPath, lookup first and the model where
	// it finds nothing.
	DraftLookup bool
	// DraftMax is the most draft tokens per slot and step
	// (sched.Config.DraftMax; 0: its default).
	DraftMax int
	// DraftIgnoreCost drafts at every step by acceptance alone
	// (sched.Config.DraftIgnoreCost; for tests).
	DraftIgnoreCost bool
}

// Server is muser's HTTP server: the model, the store, the scheduler and
// the routes. New builds it; Serve serves on a listener until its context
// ends; Close releases what New acquired when Serve is not used.
type Server struct {
	opts     Options
	log      *slog.Logger
	model    *loadedModel
	store    *store.Store
	ownStore bool
	sched    *sched.Scheduler
	drafter  sched.Drafter
	keys     *tenant.Keys
	salter   *tenant.Salter
	metrics  *metrics
	handler  http.Handler
	identity pack.Identity
	started  time.Time
	pooling  engine.Pooling // embeddings (embed.go)
	dash     *dashboard.Config
	adminKey string       // handler_admin.go
	adminAPI adminapi.API // the admin endpoint's store operations
	// responses holds the Responses API's stored responses.
	responses *respstore.Store
	grammars  grammarCache // compiled structured-output grammars (structured.go)

	closeOnce sync.Once
	closeErr  error
	served    atomic.Bool // Serve began listening

	forceOnce sync.Once
	force     chan struct{} // closed by ForceStop
}

// New loads the model, opens the store and starts the scheduler.
func New(opts Options) (s *Server, err error) {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = DefaultShutdownGrace
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	switch {
	case opts.Ctx < 0:
		return nil, &OptionError{Option: "--ctx", Reason: fmt.Sprintf("is %d; want a positive number of tokens (0: the model's)", opts.Ctx)}
	case opts.Parallel < 0:
		return nil, &OptionError{Option: "--parallel", Reason: fmt.Sprintf("is %d; want at least 1", opts.Parallel)}
	case opts.StoreMaxBytes < 0:
		return nil, &OptionError{Option: "--store-max-bytes", Reason: fmt.Sprintf("is %d; want 0 (no budget) or more", opts.StoreMaxBytes)}
	case opts.Home == "":
		return nil, &OptionError{Option: "--home", Reason: "is empty"}
	}
	s = &Server{opts: opts, log: opts.Logger, started: time.Now(), force: make(chan struct{})}
	var closers []func() error
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
	}()
	if opts.APIKeysFile != "" {
		if s.keys, err = tenant.LoadKeys(opts.APIKeysFile); err != nil {
			return nil, err
		}
	} else if err := checkLoopback(opts.Addr); err != nil {
		return nil, err
	}
	if opts.AdminKeyFile != "" {
		if s.adminKey, err = LoadAdminKey(opts.AdminKeyFile); err != nil {
			return nil, err
		}
	}
	if opts.TenantSecret != nil {
		s.salter, err = tenant.NewSalter(opts.TenantSecret)
	} else {
		s.salter, err = tenant.LoadSecret(opts.Home)
	}
	if err != nil {
		return nil, err
	}

	var m *engine.Model
	dev := opts.Device
	if dev == nil {
		dev = cpu.New(cpu.Options{Threads: opts.Threads})
	}
	eopts := engine.Options{Device: dev, Mapped: opts.MapModel}
	if opts.Model != nil {
		m, err = engine.Load(opts.Model, eopts)
	} else if opts.ModelPath != "" {
		m, err = engine.Open(opts.ModelPath, eopts)
	} else {
		return nil, &OptionError{Option: "--model", Reason: "is empty and no model was given"}
	}
	if err != nil {
		return nil, err
	}
	closers = append(closers, m.Close)
	if s.model, err = newLoadedModel(m, opts.ModelName); err != nil {
		return nil, err
	}
	if s.drafter, err = openDrafter(&opts, m, s.model.tok); err != nil {
		return nil, err
	}
	if s.drafter != nil {
		closers = append(closers, s.drafter.Close)
	}
	if err := s.model.setAlias(opts.Alias); err != nil {
		return nil, err
	}
	if s.pooling, err = resolvePooling(opts, m); err != nil {
		return nil, err
	}

	s.store = opts.Store
	if s.store == nil {
		if s.store, err = store.Open(opts.Home, store.Options{NoSync: opts.StoreNoSync}); err != nil {
			return nil, err
		}
		s.ownStore = true
		closers = append(closers, s.store.Close)
	}
	if s.responses, err = respstore.Open(opts.Home, respstore.Options{NoSync: opts.StoreNoSync, TTL: opts.ResponsesTTL}); err != nil {
		return nil, err
	}
	closers = append(closers, s.responses.Close)
	if s.identity, err = m.Identity(s.store.BlockTokens()); err != nil {
		return nil, err
	}
	s.metrics = newMetrics(func() int {
		if s.sched == nil {
			return 0
		}
		return s.sched.Pending()
	})
	s.sched, err = sched.New(sched.Config{
		Model:         m,
		Tokenizer:     s.model.tok,
		Store:         meteredStore{Store: s.store, m: s.metrics}, // metrics_ops.go
		Identity:      s.identity,
		Slots:         max(opts.Parallel, 1),
		Ctx:           opts.Ctx,
		MaxQueue:      opts.MaxQueue,
		PrefillChunk:  opts.PrefillChunk,
		StepTokens:    opts.StepTokens,
		SlotReuse:     opts.SlotReuse,
		CommitKV:      opts.CommitKV,
		DecodeBatch:   opts.DecodeBatch,
		StoreMaxBytes: opts.StoreMaxBytes,
		OnPublish:     opts.OnPublish,
		RemotePrefill: opts.RemotePrefill,
		Restore:       opts.Restore,
		Observer:      observers{s.metrics, s.newDashboard()},
		Logger:        s.log,
		Drafter:       s.drafter,
		DraftMax:      opts.DraftMax,
		// The draft lane's policy (serve/sched/draft_cost.go).
		DraftIgnoreCost: opts.DraftIgnoreCost,
	})
	if err != nil {
		return nil, err
	}
	s.metrics.describe(s) // metrics_ops.go
	s.adminAPI = adminapi.Local{Store: s.store}
	s.metrics.registerDraft(s.sched.DraftStats)
	s.handler = s.routes()
	return s, nil
}

// checkLoopback refuses an address whose host is not a loopback IP or
// "localhost".
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return &OptionError{Option: "--addr", Reason: fmt.Sprintf("%q: %v", addr, err)}
	}
	if loopbackName(host) {
		return nil
	}
	if host == "" {
		host = "every interface"
	}
	return fmt.Errorf("%w: --addr %s listens on %s; give --api-keys FILE, or listen on 127.0.0.1 or [::1]", ErrNotLoopback, addr, host)
}

// Handler returns the server's HTTP handler (every route and middleware).
func (s *Server) Handler() http.Handler { return s.handler }

// Store returns the server's store.
func (s *Server) Store() *store.Store { return s.store }

// Scheduler returns the server's scheduler.
func (s *Server) Scheduler() *sched.Scheduler { return s.sched }

// RegisterMetrics adds collectors to the registry GET /metrics serves,
// for the parts of muser that run beside the server (replication, remote
// prefill). It fails if a collector's metrics clash with ones already
// registered.
func (s *Server) RegisterMetrics(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := s.metrics.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Identity returns the pack identity the server restores and publishes
// under.
func (s *Server) Identity() pack.Identity { return s.identity }

// ModelID returns the served model's name in the APIs.
func (s *Server) ModelID() string { return s.model.id }

// Sync waits until every finished request's blocks are published.
func (s *Server) Sync(ctx context.Context) error { return s.sched.Sync(ctx) }

// Prefill makes the store hold the longest block-aligned prefix of tokens
// under (id, salt), computing what it lacks, and returns the pack that
// holds it: the producer side of disaggregated prefill (it satisfies
// net/repl's Prefiller). The salt is used as given. It fails when id is
// not the server's identity or tokens are shorter than one block.
func (s *Server) Prefill(ctx context.Context, id pack.Identity, salt []byte, tokens []int32) (pack.Digest, error) {
	if diff := s.identity.Diff(id); len(diff) > 0 {
		return pack.Digest{}, fmt.Errorf("%w: prefill for another identity (%v)", pack.ErrRefused, diff)
	}
	if b := s.store.BlockTokens(); len(tokens) < b {
		return pack.Digest{}, fmt.Errorf("prefill of %d tokens: shorter than one block of %d", len(tokens), b)
	}
	task, err := s.sched.Submit(ctx, &sched.Request{ID: "prefill", Salt: salt, Prompt: tokens, PrefillOnly: true})
	if err != nil {
		return pack.Digest{}, err
	}
	defer task.Cancel()
	res, err := task.Wait(ctx)
	if err != nil {
		return pack.Digest{}, err
	}
	return res.Pack, nil
}

// Serve serves HTTP on ln until ctx ends, then shuts down: it stops
// accepting, lets in-flight requests finish for Options.ShutdownGrace,
// cancels the rest, publishes every finished request's blocks, and closes
// the store and the model (Close). A shutdown caused by ctx returns nil.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.keys == nil {
		if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
			return fmt.Errorf("%w: listening on %s", ErrNotLoopback, ln.Addr())
		}
	}
	// No WriteTimeout: it bounds a whole answer and would cut every long
	// stream. The middleware bounds each write instead
	// (Options.WriteTimeout, statusWriter); net/http clears the deadline
	// once an answer is written.
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute, // the request, body included (not the streamed answer)
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	unannounce := s.announce(ln) // servefile.go
	s.served.Store(true)
	s.logStartup(ln) // startup.go
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
	}
	unannounce()
	s.log.Info("shutting down", "grace", s.opts.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownGrace)
	defer cancel()
	go func() {
		select {
		case <-s.force:
			s.log.Warn("shutdown forced: cancelling in-flight requests")
			cancel()
		case <-sctx.Done():
		}
	}()
	// Drain the HTTP server first: it accepts no new connection, and
	// every request it has begun to read (a body still arriving, a prompt
	// being tokenized) is still submitted to a scheduler that takes work,
	// so it finishes instead of being refused with 503. Past the grace,
	// closing the connections cancels the handlers' tasks. Then stop the
	// scheduler: it finishes what remains within the grace (a peer's
	// prefill) and publishes every finished request's blocks.
	if err := hs.Shutdown(sctx); err != nil {
		s.log.Warn("in-flight requests cancelled (grace period over, or shutdown forced)", "err", err)
		hs.Close()
	}
	if err := s.sched.Close(sctx); err != nil {
		s.log.Warn("requests cancelled at shutdown", "err", err)
	}
	if err := s.Close(); err != nil {
		return err
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// ForceStop ends a shutdown's grace period at once: in-flight requests
// are cancelled (their finished blocks are still published). `muser
// serve` calls it on a second SIGINT or SIGTERM.
func (s *Server) ForceStop() { s.forceOnce.Do(func() { close(s.force) }) }

// Close stops the scheduler (cancelling what still runs), flushes the
// publish queue, and closes the store (if the server opened it) and the
// model.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		s.sched.Close(ctx)
		var errs []error
		if s.drafter != nil {
			errs = append(errs, s.drafter.Close())
		}
		if s.ownStore {
			errs = append(errs, s.store.Close())
		}
		errs = append(errs, s.responses.Close())
		errs = append(errs, s.model.eng.Close())
		s.closeErr = errors.Join(errs...)
		if s.served.Load() { // nothing to report of a server that never listened
			s.log.Info("stopped")
		}
	})
	return s.closeErr
}
