package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/net/prefill"
	"github.com/muserhq/muser/net/repl"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve"
	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/store"
	"github.com/prometheus/client_golang/prometheus"
)

// serveReplOptions are the replication and disaggregated-prefill flags of
// `muser serve`.
type serveReplOptions struct {
	replAddr        string
	replicateTo     []string
	role            string
	prefillNode     string
	prefillFallback string
}

func (o *serveReplOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.replAddr, "repl-addr", "", "UDP host:port of the QUIC+mTLS listener for replication and prefill requests (needs 'muser cluster init' or 'node join')")
	fs.StringArrayVar(&o.replicateTo, "replicate-to", nil, "push every newly published pack to this peer node in the background (repeatable)")
	fs.StringVar(&o.role, "role", "", `"producer": answer peers' prefill requests (needs --repl-addr)`)
	fs.StringVar(&o.prefillNode, "prefill-node", "", "ask this peer node (a --role producer) to prefill each prompt's uncached blocks")
	fs.StringVar(&o.prefillFallback, "prefill-fallback", "local", "when the --prefill-node cannot help: local (prefill here, log why) or fail (the request fails, HTTP 502)")
}

// enabled reports whether any flag needs the replication node.
func (o *serveReplOptions) enabled() bool {
	return o.replAddr != "" || len(o.replicateTo) > 0 || o.role != "" || o.prefillNode != ""
}

// check validates the flags; its errors are usage errors.
func (o *serveReplOptions) check() (prefill.Fallback, error) {
	fb, err := prefill.ParseFallback(o.prefillFallback)
	if err != nil {
		return 0, fmt.Errorf("--prefill-fallback %q: want local or fail", o.prefillFallback)
	}
	if o.replAddr != "" {
		if err := checkListenAddr("--repl-addr", "udp", o.replAddr); err != nil {
			return 0, err
		}
	}
	switch o.role {
	case "":
	case "producer":
		if o.replAddr == "" {
			return 0, errors.New("--role producer needs --repl-addr: peers send prefill requests to it")
		}
	default:
		return 0, fmt.Errorf("--role %q: want producer (or no --role)", o.role)
	}
	seen := map[string]bool{}
	for _, p := range o.replicateTo {
		if p == "" {
			return 0, errors.New("--replicate-to: empty node name")
		}
		if seen[p] {
			return 0, fmt.Errorf("--replicate-to %s given twice", p)
		}
		seen[p] = true
	}
	return fb, nil
}

// serveRepl is the replication side of `muser serve`: a repl.Node sharing
// the server's store, the replicators of --replicate-to, and the prefill
// consumer of --prefill-node. It is wired in three steps: openServeRepl
// (before serve.New: the store and the hooks), start (after: the node,
// which needs the server as its Prefiller), and close (after Serve).
type serveRepl struct {
	opts     *serveReplOptions
	fallback prefill.Fallback
	log      *slog.Logger
	cluster  *cluster.Home
	store    *store.Store

	// Set by start, before the server serves; read by the hooks.
	node     *repl.Node
	reps     []*repl.Replicator
	consumer *prefill.Consumer
	// remote counts RemotePrefill outcomes, by outcome label.
	remote *prometheus.CounterVec
	// watch keeps the last push per peer and the producer's last
	// outcome, for the dashboard.
	watch *replWatch

	runCtx  context.Context
	stopRun context.CancelFunc
	wg      sync.WaitGroup
}

// openServeRepl opens the cluster directory and the store under home and
// points opts at them: the server shares the store with the node, and its
// publish and remote-prefill hooks lead here.
func openServeRepl(home string, o *serveReplOptions, fb prefill.Fallback, log *slog.Logger, opts *serve.Options) (*serveRepl, error) {
	h, err := cluster.Open(home)
	if err != nil {
		if errors.Is(err, cluster.ErrNotInitialized) {
			info := filepath.Join(cluster.Dir(home), "cluster.json")
			return nil, fmt.Errorf("replication (--repl-addr, --replicate-to, --role, --prefill-node) needs this node's cluster identity, and %s is missing: %w", info, err)
		}
		return nil, err
	}
	if err := checkNodeFiles(home); err != nil {
		return nil, err
	}
	for _, p := range append(append([]string(nil), o.replicateTo...), o.prefillNode) {
		if p == "" {
			continue
		}
		if p == h.Name() {
			return nil, fmt.Errorf("%s is this node's own name; name a peer (muser node ls)", p)
		}
		if _, err := h.Peer(p); err != nil {
			return nil, fmt.Errorf("peer %s: %w (muser node ls lists the peers)", p, err)
		}
	}
	s, err := store.Open(home, store.Options{Node: h.Name()})
	if err != nil {
		return nil, err
	}
	r := &serveRepl{opts: o, fallback: fb, log: log, cluster: h, store: s, watch: newReplWatch()}
	r.runCtx, r.stopRun = context.WithCancel(context.Background())
	opts.Store = s
	if len(o.replicateTo) > 0 {
		opts.OnPublish = r.onPublish
	}
	if o.prefillNode != "" {
		opts.RemotePrefill = r.remotePrefill
	}
	return r, nil
}

// onPublish queues a newly published pack for every --replicate-to peer.
// It never blocks: a full queue drops the pack with a log line.
func (r *serveRepl) onPublish(ev sched.PublishEvent) {
	if !ev.Result.New {
		return // it existed already and was queued when it was new
	}
	for _, rep := range r.reps {
		rep.Enqueue(ev.Result.Pack)
	}
}

// remotePrefill is the server's RemotePrefill hook: the producer installs
// the prompt's uncached blocks in the local store, which the server then
// restores. Under --prefill-fallback local every failure has been logged
// and nil returned; an error fails the request.
func (r *serveRepl) remotePrefill(ctx context.Context, id pack.Identity, salt []byte, tokens []int32) error {
	out, err := r.consumer.Prepare(ctx, id, salt, tokens)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		if errors.Is(err, prefill.ErrRemoteFailed) {
			r.countRemote("failed", err)
			return err
		}
		// A local error (the store's index) before any remote call: the
		// request can still be served by a local prefill.
		if r.fallback == prefill.FallbackFail {
			r.countRemote("failed", err)
			return err
		}
		r.countRemote("fallback", err)
		r.log.Warn("remote prefill not attempted; prefilling locally", "producer", r.opts.prefillNode, "err", err)
		return nil
	}
	switch {
	case out.Remote:
		r.countRemote("remote", nil)
		sched.NotePrefillAt(ctx, r.opts.prefillNode)
	case out.Err != nil:
		r.countRemote("fallback", out.Err)
	default:
		r.countRemote("not_needed", nil)
	}
	if out.Remote {
		r.log.Debug("remote prefill", "producer", r.opts.prefillNode, "cached", out.Cached,
			"tokens", out.Result.Tokens, "moved", out.Result.Moved, "bytes", out.Result.MovedBytes, "took", out.Duration)
	}
	return nil
}

// start creates the replication node over the server (its Prefiller when
// --role producer), listens on --repl-addr, and starts the replicators.
func (r *serveRepl) start(srv *serve.Server) error {
	id := srv.Identity()
	cfg := repl.Config{
		Store:   r.store,
		Cluster: r.cluster,
		Logger:  r.log,
		// Packs of the served model must match the engine's identity in
		// every field (a pack the server could not restore is refused
		// with a receipt); packs of other models are kept for other
		// servers of this store.
		Expect: func(offered pack.Identity) *pack.Identity {
			if offered.Model == id.Model {
				return &id
			}
			return nil
		},
	}
	if r.opts.role == "producer" {
		cfg.Prefiller = srv
	}
	n, err := repl.New(cfg)
	if err != nil {
		return err
	}
	r.node = n
	if r.opts.replAddr != "" {
		if err := n.Listen(r.opts.replAddr); err != nil {
			n.Close()
			return fmt.Errorf("--repl-addr %s: %w", r.opts.replAddr, err)
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := n.Serve(r.runCtx); err != nil {
				r.log.Error("replication listener stopped", "err", err)
			}
		}()
	}
	for _, peer := range r.opts.replicateTo {
		rep := repl.NewReplicator(n, peer, repl.ReplicatorOptions{OnResult: r.watch.onPush(peer)})
		r.reps = append(r.reps, rep)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			rep.Run(r.runCtx)
		}()
	}
	if r.opts.prefillNode != "" {
		r.consumer = &prefill.Consumer{Node: n, Store: r.store, Producer: r.opts.prefillNode,
			Fallback: r.fallback, Logger: r.log}
	}
	return srv.RegisterMetrics(r.collectors()...)
}

// collectors are the replication side's metrics on the server's
// /metrics: per --replicate-to peer, what its replicator did and how
// many packs wait; with --prefill-node, the outcome of every request's
// remote prefill.
func (r *serveRepl) collectors() []prometheus.Collector {
	var cs []prometheus.Collector
	for i, peer := range r.opts.replicateTo {
		rep := r.reps[i]
		labels := prometheus.Labels{"peer": peer}
		counter := func(name, help string, f func(repl.ReplicatorStats) int) {
			cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
				func() float64 { return float64(f(rep.Stats())) }))
		}
		counter("muser_replication_pushed_total", "Packs pushed to the peer (--replicate-to).",
			func(s repl.ReplicatorStats) int { return s.Pushed })
		counter("muser_replication_refused_total", "Packs the peer refused (each with a receipt on its side).",
			func(s repl.ReplicatorStats) int { return s.Refused })
		counter("muser_replication_retries_total", "Push attempts that failed and were retried.",
			func(s repl.ReplicatorStats) int { return s.Retries })
		counter("muser_replication_dropped_total", "Packs given up on (queue full, or still queued at shutdown).",
			func(s repl.ReplicatorStats) int { return s.Dropped })
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muser_replication_queue_packs",
			Help: "Packs waiting to be pushed to the peer.", ConstLabels: labels},
			func() float64 { return float64(rep.Pending()) }))
	}
	if r.consumer != nil {
		r.remote = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muser_remote_prefill_total",
			Help: "Requests by what the prefill producer (--prefill-node) did for them: remote (it supplied the prefix), " +
				"not_needed (cached locally or shorter than a block), fallback (it could not help; prefilled locally), " +
				"failed (the request failed, --prefill-fallback fail).",
			ConstLabels: prometheus.Labels{"producer": r.opts.prefillNode}}, []string{"outcome"})
		for _, o := range []string{"remote", "not_needed", "fallback", "failed"} {
			r.remote.WithLabelValues(o)
		}
		cs = append(cs, r.remote)
	}
	return cs
}

// countRemote records a RemotePrefill outcome (and the producer's error,
// if any, for the dashboard).
func (r *serveRepl) countRemote(outcome string, err error) {
	if r.remote != nil {
		r.remote.WithLabelValues(outcome).Inc()
	}
	r.watch.outcome(outcome, err)
}

// describe is the line `muser serve` prints about the replication side.
func (r *serveRepl) describe() string {
	s := "node " + r.cluster.Name()
	if a := r.node.Addr(); a != nil {
		s += fmt.Sprintf(", replication on quic://%s", a)
	}
	if r.opts.role != "" {
		s += ", role " + r.opts.role
	}
	for _, p := range r.opts.replicateTo {
		s += ", replicating to " + p
	}
	if r.opts.prefillNode != "" {
		s += fmt.Sprintf(", prefill from %s (fallback %s)", r.opts.prefillNode, r.fallback)
	}
	return s
}

// close flushes the replicators' queues for at most grace, abandoning
// (with a log line) what is left, then closes the node and the store. It
// runs after the server stopped, so no publish comes after it.
func (r *serveRepl) close(grace time.Duration) error {
	if len(r.reps) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		for i, rep := range r.reps {
			if left := rep.Flush(ctx); left > 0 {
				r.log.Warn("replication queue abandoned at shutdown; 'muser pack push --all' catches up",
					"peer", r.opts.replicateTo[i], "packs", left)
			}
		}
		cancel()
	}
	r.stopRun()
	var errs []error
	if r.node != nil {
		errs = append(errs, r.node.Close())
	}
	r.wg.Wait()
	for i, rep := range r.reps {
		st := rep.Stats()
		r.log.Info("replication", "peer", r.opts.replicateTo[i], "pushed", st.Pushed, "refused", st.Refused,
			"retries", st.Retries, "dropped", st.Dropped)
	}
	errs = append(errs, r.store.Close())
	return errors.Join(errs...)
}

// checkNodeFiles names the first missing credential file of the node under
// home, so a half-joined cluster directory gets a clear error.
func checkNodeFiles(home string) error {
	dir := cluster.Dir(home)
	for _, f := range []string{"node.crt", "node.key", "link.key"} {
		p := filepath.Join(dir, f)
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replication needs %s, which is missing: run 'muser node join BUNDLE' (or 'muser cluster init')", p)
		}
	}
	return nil
}
