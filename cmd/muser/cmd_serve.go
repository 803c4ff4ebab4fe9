package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/internal/version"
	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/serve"
	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/serve/tenant"
)

// serveOptions are the flags of `muser serve`.
type serveOptions struct {
	model         string
	addr          string
	apiKeys       string
	adminKeyFile  string // the admin endpoint's key (docs/serve.md, "Admin endpoint")
	ctx           int
	parallel      int
	maxQueue      int
	mmap          bool // serve.Options.MapModel
	storeMaxBytes string
	threads       int
	device        string
	slotReuse     bool
	kvCommit      bool
	grace         time.Duration
	writeTimeout  time.Duration
	responsesTTL  time.Duration
	maxBody       string
	logFormat     string
	logLevel      string
	repl          serveReplOptions
	draft         draftOptions
	modelOpts     serveModelOptions // cmd_serve_embed.go
	tier          serveTierOptions
}

func (o *serveOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.model, "model", "m", "", "GGUF model file (default: the embedded default model)")
	fs.StringVar(&o.addr, "addr", serve.DefaultAddr, "listen address host:port (a non-loopback host needs --api-keys)")
	fs.StringVar(&o.apiKeys, "api-keys", "", `file of "KEY TENANT" lines (mode 0600); without it one local tenant, loopback only`)
	fs.StringVar(&o.adminKeyFile, "admin-key-file", "", "file holding the admin key; without it /admin/v1/ admits loopback clients only")
	fs.IntVar(&o.ctx, "ctx", 0, "tokens per slot, prompt and output (default: the model's training context, at most 4096)")
	fs.IntVar(&o.parallel, "parallel", 1, "slots: requests decoded together in one batch")
	fs.IntVar(&o.maxQueue, "max-queue", sched.DefaultMaxQueue, "requests waiting for a slot before 429 (0: none wait)")
	fs.StringVar(&o.storeMaxBytes, "store-max-bytes", "", "byte budget for the store, kept by gc after publishes, a positive size such as 20GB (default: none)")
	fs.IntVarP(&o.threads, "threads", "t", runtime.NumCPU(), "engine worker threads")
	addMmapFlag(fs, &o.mmap)
	addDeviceFlag(fs, &o.device)
	fs.BoolVar(&o.slotReuse, "slot-reuse", true, "reuse an idle slot's KV for the same tenant when it covers more than the store")
	fs.BoolVar(&o.kvCommit, "kv-commit", false, "allocate and write every slot's KV memory for --ctx tokens at start, as llama.cpp does,\nso no request pays for growing it (costs that memory from the start)")
	fs.DurationVar(&o.grace, "shutdown-grace", serve.DefaultShutdownGrace, "how long in-flight requests may finish after SIGINT/SIGTERM")
	fs.DurationVar(&o.writeTimeout, "write-timeout", serve.DefaultWriteTimeout, "longest a response write may make no progress (a client that stopped reading) before the answer is abandoned and its generation cancelled (0: no bound)")
	fs.StringVar(&o.maxBody, "max-body", "8MB", "largest request body")
	fs.DurationVar(&o.responsesTTL, "responses-ttl", serve.DefaultResponsesTTL, "how long a stored /v1/responses response can be continued or fetched (0: until deleted)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	o.repl.AddFlags(fs)
	o.draft.AddFlags(fs)
	o.modelOpts.AddFlags(fs)
	o.tier.AddFlags(fs)
}

func newServeCommand() *command {
	o := &serveOptions{}
	cmd := &command{
		name:    "serve",
		summary: "serve OpenAI-, llama.cpp- and Ollama-compatible HTTP, reusing cached prefixes",
		help: `Loads the model, opens the store under --home and serves HTTP:
  OpenAI     POST /v1/chat/completions, POST /v1/completions, POST /v1/embeddings,
             GET /v1/models[/ID]; POST /v1/responses, GET and DELETE
             /v1/responses/ID (stored under --home)
  llama.cpp  POST /completion, /infill, /tokenize, /detokenize, /apply-template,
             /embedding, /embeddings, /slots/ID?action=save|restore|erase;
             GET /props, /health, /slots
  Ollama     POST /api/generate, /api/chat, /api/show, /api/embed, /api/embeddings;
             GET /api/tags, /api/ps, /api/version
  admin      /admin/v1/ (below)
  metrics    GET /metrics (Prometheus)
  dashboard  GET / in a browser (other clients get Ollama's probe text);
             the page polls GET /dashboard/api/state
Every request's prompt is matched against the store: the longest cached
prefix is restored (verified) and only the rest is computed; the new full
blocks of prompt and output are published in the background, so later
requests, and the server after a restart, reuse them.

Embeddings pool the model's final hidden states by its pooling_type, or
--pooling (the embedded default model: mean; a model without one: none,
and the pooled routes answer 400). --alias NAME names the model NAME in
every API; requests may use NAME or the model's own names. Slot files
(save/restore) are pack export files under HOME/slots/TENANT/.

Without --api-keys the server serves one local tenant, refuses to listen
beyond loopback, and refuses (403) requests a web page from elsewhere
makes a local browser send (a host name that is not a loopback one, another
site's Origin). With it, every request but GET and HEAD of /health,
/metrics and /api/version needs "Authorization: Bearer KEY", and
/metrics follows the admin endpoint's rule; each tenant's cache is
salted apart from the others' (serve/tenant documents the file format).

The admin endpoint under /admin/v1/ carries out the pack and receipts
commands on this server's store while it runs (those commands find the
server through DIR/serve.json and use it). Without --admin-key-file only
loopback clients may use it; with it, "Authorization: Bearer ADMIN_KEY"
is required from anyone (API keys never grant admin access).

--draft-model FILE (same tokenizer, checked: a difference is exit status 2),
--draft-block FILE (a block drafter trained for the model, checked likewise)
or --draft-lookup (prompt lookup) turn on speculative decoding: draft tokens
are verified in one batched step; the output is byte-identical to decoding
without them (docs/serve.md, "Speculative decoding"). Lookup with either
model lane chains them: prompt lookup first, the model where lookup finds
nothing.

A client that stops reading its answer, connection open, holds the server
for --write-timeout at most: a write that makes no progress that long
fails, and the answer is abandoned and its generation cancelled, as when
the client goes away (a stream whose client reads runs as long as it
needs). Requests have fixed bounds: 10s for the headers, 2m for the whole
request, 2m for an idle keep-alive connection.

The server prints its URL once it listens. SIGINT or SIGTERM shuts it down:
it stops accepting, lets in-flight requests finish for --shutdown-grace (a
second signal cancels them at once), publishes what finished, closes the
store, and exits 0.

Replication (needs this node's cluster directory: 'muser cluster init' or
'muser node join'; peers are named as 'muser node ls' lists them):
  --repl-addr ADDR      answer peers' pushes, pulls and prefill requests on
                        a QUIC+mTLS listener (UDP) beside HTTP
  --replicate-to NODE   push each newly published pack to NODE in the
                        background (bounded queue, retries with backoff, a
                        log line per failure; at shutdown the queue is
                        flushed for --shutdown-grace, the rest abandoned
                        with a log line: 'muser pack push --all' catches up)
  --role producer       compute prompts' KV for peers that ask (reusing this
                        store's cache) and ship it as a pack delta
  --prefill-node NODE   before each request, have NODE compute the prompt's
                        uncached whole blocks and install them here; the
                        output is identical to a local prefill. If NODE is
                        unreachable or refuses, --prefill-fallback local
                        (default) prefills here and logs why; fail answers
                        HTTP 502 (remote_prefill_failed).

Fleet tier (docs/tier.md):
  --tier s3://BUCKET/PREFIX  upload every new pack to the bucket in the
                        background (only chunks it lacks, then the sealed
                        manifest; bounded queue, retries, flushed for
                        --shutdown-grace) and, before each restore, install
                        from it the longest prefix it holds beyond the
                        store's, verified as a received pack; a refusal
                        leaves a receipt and a tier that is down or slow
                        (--tier-timeout) is logged and skipped: requests
                        never fail because of it.

` + tierHelp,
		flags: o.AddFlags,
		home:  true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) > 0 {
			return usagef(cmd, "takes no arguments, got %q", args[0])
		}
		return runServe(ctx, cmd, env, o)
	}
	return cmd
}

func runServe(ctx context.Context, cmd *command, env *cliEnv, o *serveOptions) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return usagef(cmd, "--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var logger *slog.Logger
	switch o.logFormat {
	case "text":
		logger = slog.New(slog.NewTextHandler(env.stderr, hopts))
	case "json":
		logger = slog.New(slog.NewJSONHandler(env.stderr, hopts))
	default:
		return usagef(cmd, "--log-format %q: want text or json", o.logFormat)
	}
	switch {
	case o.ctx < 0:
		return usagef(cmd, "--ctx %d: want a positive number of tokens", o.ctx)
	case o.parallel < 1:
		return usagef(cmd, "--parallel %d: want at least 1", o.parallel)
	case o.maxQueue < 0:
		return usagef(cmd, "--max-queue %d: want 0 or more", o.maxQueue)
	case o.threads < 1:
		return usagef(cmd, "--threads %d: want at least 1", o.threads)
	case o.grace <= 0:
		return usagef(cmd, "--shutdown-grace %v: want a positive duration", o.grace)
	case o.writeTimeout < 0:
		return usagef(cmd, "--write-timeout %v: want a positive duration, or 0 for no bound", o.writeTimeout)
	}
	if err := checkListenAddr("--addr", "tcp", o.addr); err != nil {
		return usagef(cmd, "%v", err)
	}
	if err := o.draft.check(); err != nil {
		return usagef(cmd, "%v", err)
	}
	fallback, err := o.repl.check()
	if err != nil {
		return usagef(cmd, "%v", err)
	}
	if err := o.tier.check(); err != nil {
		return usagef(cmd, "%v", err)
	}
	storeMax, maxBody, err := o.sizes()
	if err != nil {
		return usagef(cmd, "%v", err)
	}
	kind, ordinal, err := parseDevice(o.device)
	if err != nil {
		return usagef(cmd, "%v", err)
	}
	dev, closeDev, err := openDevice(kind, ordinal, o.threads, false)
	if err != nil {
		return err
	}
	defer closeDev()
	opts := serve.Options{
		ModelPath:     o.model,
		Addr:          o.addr,
		Home:          env.home,
		APIKeysFile:   o.apiKeys,
		AdminKeyFile:  o.adminKeyFile,
		AdminNodes:    func() ([]byte, error) { return nodeRegistryJSON(env.home) },
		Ctx:           o.ctx,
		Parallel:      o.parallel,
		MaxQueue:      o.maxQueue,
		Threads:       o.threads,
		Device:        dev,
		MapModel:      o.mmap,
		SlotReuse:     o.slotReuse,
		CommitKV:      o.kvCommit,
		ShutdownGrace: o.grace,
		WriteTimeout:  o.writeTimeout,
		ResponsesTTL:  o.responsesTTL,
		StoreMaxBytes: storeMax,
		MaxBodyBytes:  maxBody,
		Version:       version.String(),
		Logger:        logger,
		// Speculative decoding (docs/serve.md, "Speculative decoding").
		DraftModelPath:  o.draft.model,
		DraftBlockPath:  o.draft.block,
		DraftBlockOnCPU: o.draft.device == "cpu",
		DraftLookup:     o.draft.lookup,
		DraftMax:        o.draft.max,
	}
	if opts.MaxQueue == 0 {
		opts.MaxQueue = -1 // serve: negative means no queue
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = -1 // serve: negative means no bound
	}
	if o.model == "" {
		f, err := defaultmodel.File()
		if err != nil {
			return err
		}
		opts.Model, opts.ModelName = f, defaultmodel.Name
		fmt.Fprintf(env.stderr, "muser serve: no --model given; serving the embedded default model %s (%s)\n",
			defaultmodel.Name, humanBytes(defaultmodel.Size))
	}
	o.modelOpts.apply(&opts, o.model == "")
	// A node of a cluster salts tenants with a secret derived from the
	// cluster's link secret, the same on every node, so that replicated
	// packs answer the same tenant's prompts anywhere in the cluster.
	var clusterHome *cluster.Home // for the dashboard's Nodes tab
	if h, err := cluster.Open(env.home); err == nil {
		clusterHome = h
		ls, err := h.LinkSecret()
		if err != nil {
			return fmt.Errorf("cluster %s: %w", cluster.Dir(env.home), err)
		}
		opts.TenantSecret = tenant.ClusterSecret(ls[:])
		logger.Info("tenant cache salts derive from the cluster's link secret", "cluster", h.Info().ClusterID, "node", h.Name())
	} else if !errors.Is(err, cluster.ErrNotInitialized) {
		return fmt.Errorf("cluster %s: %w", cluster.Dir(env.home), err)
	}
	var rs *serveRepl
	if o.repl.enabled() {
		if rs, err = openServeRepl(env.home, &o.repl, fallback, logger, &opts); err != nil {
			return err
		}
	}
	if clusterHome != nil {
		opts.Cluster = dashboardCluster(clusterHome, rs)
	}
	var ts *serveTier
	// abandon closes the tier and replication sides opened so far, when
	// the server does not start.
	abandon := func() {
		if ts != nil {
			ts.close(0)
		}
		if rs != nil {
			rs.close(0)
		}
	}
	if o.tier.url != "" {
		if ts, err = openServeTier(env.home, &o.tier, logger, &opts); err != nil {
			abandon()
			var uerr *usageError
			if errors.As(err, &uerr) && uerr.cmd == nil {
				uerr.cmd = cmd
			}
			return err
		}
	}
	s, err := serve.New(opts)
	if err != nil {
		abandon()
		if errors.Is(err, serve.ErrNotLoopback) || errors.Is(err, serve.ErrOptions) {
			return usagef(cmd, "%v", err)
		}
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		s.Close()
		abandon()
		return err
	}
	if rs != nil {
		if err := rs.start(s); err != nil {
			ln.Close()
			s.Close()
			abandon()
			return err
		}
	}
	if ts != nil {
		if err := s.RegisterMetrics(ts.collectors()...); err != nil {
			ln.Close()
			s.Close()
			abandon()
			return err
		}
	}
	fmt.Fprintf(env.stdout, "muser serve: %s ready on http://%s (store %s)\n", s.ModelID(), urlHost(ln.Addr()), env.home)
	if rs != nil {
		fmt.Fprintf(env.stdout, "muser serve: %s\n", rs.describe())
	}
	if ts != nil {
		fmt.Fprintf(env.stdout, "muser serve: %s\n", ts.describe())
	}
	// A second SIGINT or SIGTERM during the shutdown cancels the requests
	// still running instead of waiting out --shutdown-grace.
	sigs := make(chan os.Signal, 1)
	done := make(chan struct{})
	defer func() {
		signal.Stop(sigs)
		close(done)
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		// Listen only now, so the signal that began the shutdown does
		// not count as the second.
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		select {
		case <-sigs:
			fmt.Fprintln(env.stderr, "muser serve: second signal; cancelling in-flight requests")
			s.ForceStop()
		case <-done:
		}
	}()
	err = s.Serve(ctx, ln)
	if ts != nil {
		err = errors.Join(err, ts.close(o.grace))
	}
	if rs != nil {
		err = errors.Join(err, rs.close(o.grace))
	}
	return err
}

// sizes checks --store-max-bytes (0 when absent: no budget), --max-body
// and --responses-ttl, and returns the two sizes in bytes.
func (o *serveOptions) sizes() (storeMax, maxBody int64, err error) {
	if o.responsesTTL < 0 {
		return 0, 0, fmt.Errorf("--responses-ttl: %v is negative", o.responsesTTL)
	}
	if o.storeMaxBytes != "" {
		n, err := parseBytes(o.storeMaxBytes)
		if err != nil {
			return 0, 0, fmt.Errorf("--store-max-bytes: %v", err)
		}
		if n <= 0 {
			// serve.Options takes 0 as no budget: a budget of nothing
			// would be no budget at all.
			return 0, 0, fmt.Errorf("--store-max-bytes %q: want a positive size such as 20GB (leave the flag out for no budget)", o.storeMaxBytes)
		}
		storeMax = n
	}
	maxBody, err = parseBytes(o.maxBody)
	if err != nil || maxBody <= 0 {
		return 0, 0, fmt.Errorf("--max-body %q: want a positive size such as 8MB", o.maxBody)
	}
	return storeMax, maxBody, nil
}

// checkListenAddr checks that addr, the value of flag, is a host:port
// that network ("tcp" or "udp") can listen on: a port number from 0
// (any free port; also when empty) to 65535, or a service name the system
// knows. The host is checked when the listener opens.
func checkListenAddr(flag, network, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %v", flag, addr, err)
	}
	if port == "" {
		return nil // as port 0, as net.Listen takes it
	}
	if port[0] >= '0' && port[0] <= '9' || port[0] == '-' || port[0] == '+' {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return fmt.Errorf("%s %q: port %q is not 0..65535", flag, addr, port)
		}
		return nil
	}
	if _, err := net.LookupPort(network, port); err != nil {
		return fmt.Errorf("%s %q: port %q is not 0..65535 or a known service name", flag, addr, port)
	}
	return nil
}

// urlHost renders a listener's address for a URL.
func urlHost(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ta.IP.IsUnspecified() {
		return fmt.Sprintf("localhost:%d", ta.Port)
	}
	return net.JoinHostPort(ta.IP.String(), fmt.Sprint(ta.Port))
}
