package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve"
	"github.com/muserhq/muser/serve/adminapi"
	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/tier"
)

// tierFlags are the --tier flags shared by serve and the pack commands.
type tierFlags struct {
	url     string
	keyFile string
}

func (o *tierFlags) AddFlags(fs *pflag.FlagSet, what string) {
	fs.StringVar(&o.url, "tier", "", what+" the fleet tier at `s3://BUCKET/PREFIX` (endpoint and credentials from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, ~/.aws/credentials)")
	fs.StringVar(&o.keyFile, "tier-key", "", "seal key `FILE` of the tier (hex, at least 16 bytes) for a node outside a cluster; a cluster's nodes derive it from the link secret")
}

// tierHelp is the help text on the tier's key and credentials.
const tierHelp = `The fleet tier (--tier s3://BUCKET/PREFIX, docs/tier.md): the endpoint
and credentials come from AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3; a
non-AWS endpoint is addressed path-style), AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION and the shared
credentials file. Manifests in the tier are sealed with a key every node
shares: a cluster's nodes ('muser cluster init', 'muser node join')
derive it from the cluster's link secret; a node outside a cluster needs
--tier-key FILE (64 hex digits, e.g. from 'openssl rand -hex 32'), and
without either --tier is refused.`

// openTier opens the tier of o for the node under home. It returns the
// tier and the node's name (the cluster's, else the host's).
func openTier(home string, o *tierFlags) (*tier.Tier, string, error) {
	loc, err := tier.ParseURL(o.url)
	if err != nil {
		return nil, "", &usageError{err: fmt.Errorf("--tier: %w", err)}
	}
	var key []byte
	name := ""
	h, cerr := cluster.Open(home)
	if cerr == nil {
		name = h.Name()
	}
	switch {
	case o.keyFile != "":
		b, err := os.ReadFile(o.keyFile)
		if err != nil {
			return nil, "", fmt.Errorf("--tier-key: %w", err)
		}
		key, err = hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(key) < pack.MinSealKey {
			return nil, "", &usageError{err: fmt.Errorf("--tier-key %s: want at least %d bytes as hex digits", o.keyFile, pack.MinSealKey)}
		}
	case cerr == nil:
		ls, err := h.LinkSecret()
		if err != nil {
			return nil, "", fmt.Errorf("cluster %s: %w", cluster.Dir(home), err)
		}
		key = tier.ClusterKey(ls[:])
	case errors.Is(cerr, cluster.ErrNotInitialized):
		return nil, "", &usageError{err: fmt.Errorf("--tier needs the cluster's seal key and this node is in no cluster (%s is missing): run 'muser cluster init' or 'muser node join', or give --tier-key FILE", cluster.Dir(home))}
	default:
		return nil, "", fmt.Errorf("cluster %s: %w", cluster.Dir(home), cerr)
	}
	if name == "" {
		if name, err = os.Hostname(); err != nil || name == "" {
			name = "muser"
		}
	}
	t, err := tier.Open(tier.ConfigFromEnv(loc, key, name))
	if err != nil {
		return nil, "", &usageError{err: fmt.Errorf("--tier: %w", err)}
	}
	return t, name, nil
}

// runTierLs is `muser pack ls --tier`.
func runTierLs(ctx context.Context, env *cliEnv, o *tierFlags, asJSON bool) error {
	t, _, err := openTier(env.home, o)
	if err != nil {
		return err
	}
	packs, err := t.List(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(env.stdout, packs)
	}
	tb := &table{}
	tb.add("ID", "TOKENS", "BYTES", "CHUNKS", "IDENTITY", "PRODUCER", "UPLOADED", "LAST USE", "STATE")
	var total uint64
	bad := 0
	for _, p := range packs {
		state := "-"
		switch {
		case p.Err != "":
			state = "bad: " + p.Err
			bad++
		case p.Pinned:
			state = "pinned"
		}
		tb.add(p.Pack.Short(), strconv.Itoa(p.Tokens), formatBytes(int64(p.Bytes)), strconv.Itoa(p.Blocks),
			p.IdentityKey.Short(), p.Producer, p.Modified, p.LastUse, state)
		total += p.Bytes
	}
	tb.write(env.stdout)
	fmt.Fprintf(env.stdout, "%d packs in %s (%d that do not verify), %s of chunks without dedup\n", len(packs), t, bad, formatBytes(int64(total)))
	return nil
}

// runTierVerify is `muser pack verify --tier`.
func runTierVerify(ctx context.Context, env *cliEnv, o *tierFlags, asJSON bool) error {
	t, _, err := openTier(env.home, o)
	if err != nil {
		return err
	}
	rep, err := t.Verify(ctx, tier.VerifyOptions{})
	if err != nil {
		return err
	}
	n := len(rep.Findings)
	if asJSON {
		out := adminapi.VerifyReport{Packs: rep.Packs, ChunksRead: rep.Chunks, BytesRead: rep.Bytes, Findings: []adminapi.Finding{},
			Errors: n, Quarantined: []pack.Digest{}}
		for _, f := range rep.Findings {
			fj := adminapi.Finding{Error: f.Error(), Reason: string(store.ReasonOf(f))}
			if errors.Is(f, tier.ErrNotFound) {
				fj.Reason = string(pack.ReasonMissingChunk)
			}
			if !f.Pack.IsZero() {
				p := f.Pack
				fj.Pack = &p
			}
			out.Findings = append(out.Findings, fj)
		}
		if err := writeJSON(env.stdout, out); err != nil {
			return err
		}
	} else {
		for _, f := range rep.Findings {
			fmt.Fprintln(env.stdout, f)
		}
		fmt.Fprintf(env.stderr, "%s: %d packs, %d chunks, %s read\n", t, rep.Packs, rep.Chunks, formatBytes(rep.Bytes))
	}
	if n > 0 {
		if !asJSON {
			fmt.Fprintf(env.stdout, "%d errors found\n", n)
		}
		return &reportedError{err: fmt.Errorf("%d errors found: %w", n, pack.ErrCorrupt)}
	}
	if !asJSON {
		fmt.Fprintln(env.stdout, "OK")
	}
	return nil
}

// runTierGC is `muser pack gc --tier`.
func runTierGC(ctx context.Context, env *cliEnv, o *tierFlags, maxBytes int64, grace time.Duration, dryRun bool) error {
	t, _, err := openTier(env.home, o)
	if err != nil {
		return err
	}
	rep, err := t.GC(ctx, tier.GCOptions{MaxBytes: maxBytes, Grace: grace, DryRun: dryRun})
	if err != nil {
		return err
	}
	verb := "evicted"
	if dryRun {
		verb = "would evict"
	}
	for _, p := range rep.Evicted {
		fmt.Fprintf(env.stdout, "%s pack %s (least recently used)\n", verb, p.Short())
	}
	del := "deleted"
	if dryRun {
		del = "would delete"
	}
	fmt.Fprintf(env.stdout, "%s: %d packs (%d pinned), %d chunks, %s; %s %d packs; %s %d unreferenced chunks, %s; kept %d younger than the grace period; %d manifests that do not verify\n",
		t, rep.Packs, rep.Pinned, rep.Chunks, formatBytes(rep.Bytes), verb, len(rep.Evicted), del, rep.DeletedChunks,
		formatBytes(rep.DeletedBytes), rep.Young, rep.BadManifests)
	if rep.Strays > 0 {
		fmt.Fprintf(env.stdout, "left alone %d objects under chunks/ that are not chunks (keys other than chunks/HEX)\n", rep.Strays)
	}
	if rep.StaleUses > 0 {
		fmt.Fprintf(env.stdout, "%s %d use markers of packs no longer in the tier\n", del, rep.StaleUses)
	}
	if rep.Stopped {
		fmt.Fprintf(env.stdout, "stopped after %v (rule G4); run gc again\n", tier.MaxGCTime)
	}
	return nil
}

// runTierPin is `muser pack pin --tier` and `muser pack unpin --tier`.
func runTierPin(ctx context.Context, env *cliEnv, o *tierFlags, prefix string, pin bool) error {
	t, _, err := openTier(env.home, o)
	if err != nil {
		return err
	}
	res, err := t.PinPack(ctx, prefix, pin)
	if err != nil {
		return err
	}
	state := map[bool]string{true: "pinned", false: "unpinned"}
	was := ""
	if res.Was == res.Pinned {
		was = " (it already was)"
	}
	fmt.Fprintf(env.stdout, "%s pack %s in %s%s\n", state[res.Pinned], res.Pack.Short(), t, was)
	return nil
}

// serveTierOptions are `muser serve`'s tier flags.
type serveTierOptions struct {
	tierFlags
	timeout time.Duration
	refresh time.Duration
	queue   int
}

func (o *serveTierOptions) AddFlags(fs *pflag.FlagSet) {
	o.tierFlags.AddFlags(fs, "write every new pack behind to, and serve local misses from,")
	fs.DurationVar(&o.timeout, "tier-timeout", 30*time.Second, "longest wait for the tier on one request before prefilling locally")
	fs.DurationVar(&o.refresh, "tier-refresh", 30*time.Second, "how often the tier's index of manifests is refreshed")
	fs.IntVar(&o.queue, "tier-queue", 1024, "packs waiting for upload to the tier; beyond it new packs are not uploaded")
}

// check validates the flags; its errors are usage errors. The tier's
// own defaults stand in for values it takes as unset (0 or less), so a
// value out of range must not reach it.
func (o *serveTierOptions) check() error {
	switch {
	case o.timeout <= 0:
		return fmt.Errorf("--tier-timeout %v: want a positive duration", o.timeout)
	case o.refresh <= 0:
		return fmt.Errorf("--tier-refresh %v: want a positive duration", o.refresh)
	case o.queue < 1:
		return fmt.Errorf("--tier-queue %d: want at least 1", o.queue)
	}
	return nil
}

// serveTier is the tier side of `muser serve`: the uploader (OnPublish)
// and the read-through (the restore, serve.Options.Restore).
type serveTier struct {
	t        *tier.Tier
	up       *tier.Uploader
	rt       *tier.ReadThrough
	log      *slog.Logger
	ownStore *store.Store
}

// openServeTier wires the tier into opts: it opens the store (unless the
// replication side did), chains OnPublish to the uploader and restores
// through the tier, asking a prefill producer (RemotePrefill) only for
// prompts the tier does not hold.
func openServeTier(home string, o *serveTierOptions, log *slog.Logger, opts *serve.Options) (*serveTier, error) {
	t, name, err := openTier(home, &o.tierFlags)
	if err != nil {
		return nil, err
	}
	st := &serveTier{t: t, log: log}
	if opts.Store == nil {
		s, err := store.Open(home, store.Options{Node: name, NoSync: opts.StoreNoSync})
		if err != nil {
			return nil, err
		}
		opts.Store, st.ownStore = s, s
	}
	st.up = tier.NewUploader(t, opts.Store, tier.UploaderOptions{Queue: o.queue, Logger: log})
	st.rt = tier.NewReadThrough(t, opts.Store, tier.ReadThroughOptions{Timeout: o.timeout, Refresh: o.refresh, Logger: log})
	prevPublish := opts.OnPublish
	opts.OnPublish = func(ev sched.PublishEvent) {
		if prevPublish != nil {
			prevPublish(ev)
		}
		if ev.Result.New {
			_ = st.up.Enqueue(ev.Result.Pack)
		}
	}
	opts.Restore = st.rt.Restore
	if prev := opts.RemotePrefill; prev != nil {
		opts.RemotePrefill = func(ctx context.Context, id pack.Identity, salt []byte, tokens []int32) error {
			if st.rt.Holds(id, salt, tokens) {
				return nil // the restore reads the tier's blocks through
			}
			return prev(ctx, id, salt, tokens)
		}
	}
	// Warm the index before serving; a tier that is down or slow is
	// logged (by Refresh) and retried every --tier-refresh.
	cctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := st.rt.Refresh(cctx); err == nil {
		log.Info("tier index loaded", "tier", t.String(), "packs", st.rt.Index().Len())
	}
	st.rt.Start()
	return st, nil
}

// collectors are the tier's metrics on the server's /metrics.
func (st *serveTier) collectors() []prometheus.Collector {
	labels := prometheus.Labels{"tier": st.t.String()}
	up := func(name, help string, f func(tier.UploaderStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return f(st.up.Stats()) })
	}
	cs := []prometheus.Collector{
		up("muser_tier_uploaded_total", "Packs whose manifest is in the tier (written or found there).",
			func(s tier.UploaderStats) float64 { return float64(s.Uploaded) }),
		up("muser_tier_upload_bytes_total", "Chunk bytes put into the tier.",
			func(s tier.UploaderStats) float64 { return float64(s.Bytes) }),
		up("muser_tier_upload_retries_total", "Upload attempts that failed and were retried.",
			func(s tier.UploaderStats) float64 { return float64(s.Retries) }),
		up("muser_tier_upload_dropped_total", "Packs given up on (queue full, attempts spent, still queued at shutdown).",
			func(s tier.UploaderStats) float64 { return float64(s.Dropped) }),
		up("muser_tier_upload_refused_total", "Packs not uploaded because the local copy failed verification (each with a receipt).",
			func(s tier.UploaderStats) float64 { return float64(s.Refused) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muser_tier_upload_queue_packs", Help: "Packs waiting for upload to the tier.",
			ConstLabels: labels}, func() float64 { return float64(st.up.Pending()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muser_tier_index_packs", Help: "Manifests in the tier's index.",
			ConstLabels: labels}, func() float64 { return float64(st.rt.Index().Len()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muser_tier_read_bytes_total", Help: "Chunk bytes read from the tier.",
			ConstLabels: labels}, func() float64 { _, b := st.rt.Stats(); return float64(b) }),
	}
	for _, oc := range tier.Outcomes {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muser_tier_reads_total",
			Help:        "Read-throughs by outcome: hit (installed from the tier), miss, refused (a receipt says why; prefilled locally), unavailable (the tier was down or slow; prefilled locally).",
			ConstLabels: prometheus.Labels{"tier": st.t.String(), "outcome": oc}},
			func() float64 { m, _ := st.rt.Stats(); return float64(m[oc]) }))
	}
	return cs
}

// describe is the line `muser serve` prints about the tier.
func (st *serveTier) describe() string {
	return fmt.Sprintf("fleet tier %s (write-behind, read-through)", st.t)
}

// close flushes the upload queue for at most grace, stops the index
// refresh and closes the store if it opened it.
func (st *serveTier) close(grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := st.up.Close(ctx); err != nil {
		st.log.Warn("tier uploads abandoned at shutdown", "tier", st.t.String(), "pending", st.up.Pending())
	}
	st.rt.Close()
	s := st.up.Stats()
	st.log.Info("tier", "tier", st.t.String(), "uploaded", s.Uploaded, "bytes", s.Bytes, "retries", s.Retries, "dropped", s.Dropped)
	if st.ownStore != nil {
		return st.ownStore.Close()
	}
	return nil
}
