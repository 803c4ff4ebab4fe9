package serve

import (
	"context"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/store"
)

// opsMetrics are the metrics operators read beside the request metrics:
// what runs (build, model, slots, context), the store's packs, restore,
// prefill and verify timings, and gc evictions.
type opsMetrics struct {
	reg           *prometheus.Registry
	verify        prometheus.Histogram
	evictions     prometheus.Counter
	restore       prometheus.Histogram
	prefillTokens prometheus.Counter
	prefillSecs   prometheus.Counter
	prefillRate   prometheus.Histogram
}

// newOpsMetrics registers the operator metrics that need nothing of the
// server in reg; describe registers the rest once the server is built.
func newOpsMetrics(reg *prometheus.Registry) *opsMetrics {
	o := &opsMetrics{
		reg: reg,
		verify: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "muser_verify_duration_seconds", Help: "Time taken by verifies run through the admin endpoint.",
			Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900}}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "muser_gc_evicted_packs_total", Help: "Packs removed by gc: under --store-max-bytes after publishes, and through the admin endpoint."}),
		restore: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "muser_restore_duration_seconds", Help: "Time to restore a request's cached prefix from the store (every chunk re-hashed).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}),
		prefillTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "muser_prefill_tokens_total", Help: "Prompt tokens computed (not restored)."}),
		prefillSecs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "muser_prefill_seconds_total", Help: "Time spent computing prompt tokens, summed over requests (tokens over seconds is the prefill throughput)."}),
		prefillRate: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "muser_prefill_tokens_per_second", Help: "Prefill throughput of each request that computed prompt tokens.",
			Buckets: prometheus.ExponentialBuckets(10, 2, 14)}),
	}
	reg.MustRegister(o.verify, o.evictions, o.restore, o.prefillTokens, o.prefillSecs, o.prefillRate)
	return o
}

// describe registers what the server is: build and model info, slots,
// context size, and the store's pack count (read from the ledger at each
// scrape); and sets the store's bytes once at start.
func (m *metrics) describe(s *Server) {
	o := m.ops
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "muser_build_info", Help: "The running muser build (value 1)."}, []string{"version", "go_version"})
	build.WithLabelValues(s.opts.Version, runtime.Version()).Set(1)
	model := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "muser_model_info", Help: "The served model and the pack identity its KV is stored under (value 1)."},
		[]string{"model", "arch", "quant", "kv", "engine", "identity"})
	id := s.identity
	model.WithLabelValues(s.model.id, id.Arch, id.Quant, id.KV, id.Engine, id.Key().Short()).Set(1)
	slots := prometheus.NewGauge(prometheus.GaugeOpts{Name: "muser_slots", Help: "Slots (--parallel): requests decoded together."})
	slots.Set(float64(s.sched.Slots()))
	ctx := prometheus.NewGauge(prometheus.GaugeOpts{Name: "muser_ctx_tokens", Help: "Tokens one slot holds, prompt and output (--ctx)."})
	ctx.Set(float64(s.sched.Ctx()))
	block := prometheus.NewGauge(prometheus.GaugeOpts{Name: "muser_store_block_tokens", Help: "Tokens per block of the store."})
	block.Set(float64(s.store.BlockTokens()))
	packs := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muser_store_packs", Help: "Packs in the store (quarantined ones included)."},
		func() float64 {
			st, err := s.store.Stats()
			if err != nil {
				return -1
			}
			return float64(st.Packs)
		})
	o.reg.MustRegister(build, model, slots, ctx, block, packs)
	if st, err := s.store.Stats(); err == nil {
		m.storeBytes.Set(float64(st.Bytes))
	}
}

// observeVerify records one finished verify.
func (m *metrics) observeVerify(d time.Duration) { m.ops.verify.Observe(d.Seconds()) }

// gcEvicted counts packs removed by a gc run.
func (m *metrics) gcEvicted(n int) { m.ops.evictions.Add(float64(n)) }

// finishedOps records a finished request's restore time and prefill
// throughput (called by Finished).
func (m *metrics) finishedOps(res sched.Result) {
	o := m.ops
	if res.CacheSource == "store" && !res.Restored.IsZero() && !res.Started.IsZero() {
		o.restore.Observe(res.Restored.Sub(res.Started).Seconds())
	}
	from := res.Started
	if !res.Restored.IsZero() {
		from = res.Restored
	}
	computed := res.PromptTokens - res.CachedTokens
	if computed <= 0 || res.PrefillDone.IsZero() || from.IsZero() {
		return
	}
	secs := res.PrefillDone.Sub(from).Seconds()
	o.prefillTokens.Add(float64(computed))
	if secs > 0 {
		o.prefillSecs.Add(secs)
		o.prefillRate.Observe(float64(computed) / secs)
	}
}

// meteredStore is the scheduler's view of the store: gc runs under the
// byte budget count their evictions.
type meteredStore struct {
	*store.Store
	m *metrics
}

// GC runs the store's gc and counts the packs it removed.
func (ms meteredStore) GC(ctx context.Context, opts store.GCOptions) (store.GCReport, error) {
	rep, err := ms.Store.GC(ctx, opts)
	if err == nil && !opts.DryRun {
		ms.m.gcEvicted(len(rep.Removed.Packs))
	}
	return rep, err
}

var _ sched.Store = meteredStore{}
