package serve

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// opsMetrics are the metrics operators read beside the request metrics:
// verify latency and gc evictions done through the admin endpoint.
type opsMetrics struct {
	verify    prometheus.Histogram
	evictions prometheus.Counter
}

// newOpsMetrics registers the operator metrics in reg.
func newOpsMetrics(reg *prometheus.Registry) *opsMetrics {
	o := &opsMetrics{
		verify: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "muser_verify_duration_seconds", Help: "Time taken by verifies run through the admin endpoint.",
			Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900}}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "muser_gc_evicted_packs_total", Help: "Packs removed by gc runs of the admin endpoint."}),
	}
	reg.MustRegister(o.verify, o.evictions)
	return o
}

// observeVerify records one finished verify.
func (m *metrics) observeVerify(d time.Duration) {
	if m.ops != nil {
		m.ops.verify.Observe(d.Seconds())
	}
}

// gcEvicted counts packs removed by a gc run.
func (m *metrics) gcEvicted(n int) {
	if m.ops != nil {
		m.ops.evictions.Add(float64(n))
	}
}
