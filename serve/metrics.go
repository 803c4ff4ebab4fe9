package serve

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/store"
)

// metrics are the server's Prometheus metrics, in a registry of its own
// (so several servers in one process, as in tests, do not collide). It
// implements sched.Observer.
type metrics struct {
	reg *prometheus.Registry

	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	promptTokens prometheus.Counter
	genTokens    prometheus.Counter
	cachedTokens *prometheus.CounterVec
	ttft         *prometheus.HistogramVec
	interToken   prometheus.Histogram
	queue        prometheus.Gauge
	busy         prometheus.Gauge
	storeBytes   prometheus.Gauge
	receipts     *prometheus.CounterVec
	publishes    *prometheus.CounterVec
	publishBytes prometheus.Counter
	ops          *opsMetrics // metrics_ops.go

	// prompt and cached tokens of admitted requests, for the hit ratio.
	admittedPrompt, admittedCached atomic.Int64
}

var _ sched.Observer = (*metrics)(nil)

func newMetrics(pending func() int) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	latency := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "muser_requests_total", Help: "HTTP requests answered, by route pattern and status code."},
		[]string{"route", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "muser_request_duration_seconds", Help: "Time from a generation request's arrival to its last token.",
		Buckets: latency}, []string{"route"})
	m.promptTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "muser_prompt_tokens_total", Help: "Prompt tokens of finished generation requests (tokens in)."})
	m.genTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "muser_generated_tokens_total", Help: "Tokens generated (tokens out)."})
	m.cachedTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "muser_cached_tokens_total", Help: "Prompt tokens not computed because their KV came from the store or was still in the slot."},
		[]string{"source"})
	m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "muser_time_to_first_token_seconds", Help: "Time from a generation request's arrival to its first token.",
		Buckets: latency}, []string{"route"})
	m.interToken = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "muser_inter_token_seconds", Help: "Time between two tokens of one request.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}})
	m.queue = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "muser_queue_depth", Help: "Requests waiting for a slot."})
	m.busy = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "muser_slots_busy", Help: "Slots serving a request."})
	m.storeBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "muser_store_bytes", Help: "Bytes of chunks and manifests of live packs in the store."})
	m.receipts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "muser_receipts_total", Help: "Restores the store refused (fail closed), by receipt reason."},
		[]string{"reason"})
	m.publishes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "muser_publishes_total", Help: "Publishes of finished requests' blocks, by result (ok, error, dropped)."},
		[]string{"result"})
	m.publishBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "muser_publish_bytes_total", Help: "Chunk bytes written by publishes."})
	hit := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "muser_cache_hit_ratio", Help: "Cached prompt tokens over prompt tokens of requests admitted since start."},
		func() float64 {
			p := m.admittedPrompt.Load()
			if p == 0 {
				return 0
			}
			return float64(m.admittedCached.Load()) / float64(p)
		})
	pend := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "muser_publish_pending", Help: "Finished requests whose blocks are being copied out or published."},
		func() float64 { return float64(pending()) })
	m.reg.MustRegister(pend, m.requests, m.duration, m.promptTokens, m.genTokens, m.cachedTokens, m.ttft, m.interToken,
		m.queue, m.busy, m.storeBytes, m.receipts, m.publishes, m.publishBytes, hit,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.ops = newOpsMetrics(m.reg)
	for _, src := range []string{"store", "slot"} {
		m.cachedTokens.WithLabelValues(src)
	}
	for _, r := range []string{"ok", "error", "dropped"} {
		m.publishes.WithLabelValues(r)
	}
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// request counts an answered request.
func (m *metrics) request(pattern string, status int) {
	if pattern == "" {
		pattern = "unmatched"
	}
	if status == 0 {
		status = http.StatusOK
	}
	m.requests.WithLabelValues(pattern, strconv.Itoa(status)).Inc()
}

// The sched.Observer methods.

func (m *metrics) Queue(depth int) { m.queue.Set(float64(depth)) }
func (m *metrics) Busy(slots int)  { m.busy.Set(float64(slots)) }
func (m *metrics) Prefix(prompt, cached int, source string) {
	m.admittedPrompt.Add(int64(prompt))
	m.admittedCached.Add(int64(cached))
}
func (m *metrics) Refused(reason string)      { m.receipts.WithLabelValues(reason).Inc() }
func (m *metrics) InterToken(d time.Duration) { m.interToken.Observe(d.Seconds()) }

// Finished records a request that ended: tokens in, out and cached, time
// to first token and duration from its arrival.
func (m *metrics) Finished(req *sched.Request, res sched.Result) {
	m.finishedOps(res) // metrics_ops.go
	m.promptTokens.Add(float64(res.PromptTokens))
	m.genTokens.Add(float64(len(res.Generated)))
	if res.CachedTokens > 0 {
		m.cachedTokens.WithLabelValues(res.CacheSource).Add(float64(res.CachedTokens))
	}
	start := req.Received
	if start.IsZero() {
		start = res.Queued
	}
	route := req.Route
	if route == "" {
		route = "internal"
	}
	if !res.FirstToken.IsZero() {
		m.ttft.WithLabelValues(route).Observe(res.FirstToken.Sub(start).Seconds())
	}
	m.duration.WithLabelValues(route).Observe(res.Done.Sub(start).Seconds())
}
func (m *metrics) Published(res store.PublishResult, err error) {
	if err != nil {
		m.publishes.WithLabelValues("error").Inc()
		return
	}
	m.publishes.WithLabelValues("ok").Inc()
	m.publishBytes.Add(float64(res.BytesWritten))
}
func (m *metrics) PublishDropped()    { m.publishes.WithLabelValues("dropped").Inc() }
func (m *metrics) StoreBytes(n int64) { m.storeBytes.Set(float64(n)) }
