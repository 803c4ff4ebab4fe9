package dashboard

import (
	"sync"
	"time"

	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/store"
)

// Series geometry: the charts cover SeriesWindow in buckets of
// SeriesStep.
const (
	SeriesStep   = 5 * time.Second
	SeriesWindow = 10 * time.Minute
	seriesLen    = int(SeriesWindow / SeriesStep)
)

// recentLen is how many finished requests the recorder remembers.
const recentLen = 20

// bucket sums what finished (or was admitted) within one SeriesStep.
type bucket struct {
	start                  int64 // unix seconds of the bucket's start; 0: empty
	requests               int
	ttftSum                time.Duration
	ttftN                  int
	decodeTokens           int
	decodeTime             time.Duration
	promptTokens, cachedTk int
}

// totals are counted since the recorder started.
type totals struct {
	requests                 int
	promptTokens, generated  int
	admittedPrompt, cached   int
	cachedStore, cachedSlot  int
	refused                  map[string]int
	publishes, publishErrors int
	publishDropped           int
	publishBytes             int64
	ttftSum                  time.Duration
	ttftN                    int
	decodeTokens             int
	decodeTime               time.Duration
}

// Recorder keeps what the dashboard charts and sums: it implements
// sched.Observer (the server calls it beside its Prometheus metrics) and
// keeps per-SeriesStep buckets over SeriesWindow, totals since it started,
// and the last few finished requests. It is safe for concurrent use and
// never blocks beyond its own short lock.
type Recorder struct {
	now func() time.Time

	mu      sync.Mutex
	started time.Time
	buckets [seriesLen]bucket
	tot     totals
	recent  []RequestSummary // newest last
}

var _ sched.Observer = (*Recorder)(nil)

// NewRecorder returns an empty Recorder started now.
func NewRecorder() *Recorder { return newRecorder(time.Now) }

func newRecorder(now func() time.Time) *Recorder {
	return &Recorder{now: now, started: now(), tot: totals{refused: map[string]int{}}}
}

// RequestSummary is one finished request as the Inference tab lists it.
// Its durations are measured by this process for that request; a phase
// that did not run is nil.
type RequestSummary struct {
	ID           string    `json:"id"`
	Route        string    `json:"route"`
	Done         time.Time `json:"done"`
	PromptTokens int       `json:"prompt_tokens"`
	CachedTokens int       `json:"cached_tokens"`
	CacheSource  string    `json:"cache_source"`
	Generated    int       `json:"generated_tokens"`
	Finish       string    `json:"finish"`
	RestoreMS    *float64  `json:"restore_ms"`
	PrefillMS    *float64  `json:"prefill_ms"`
	TTFTMS       *float64  `json:"ttft_ms"`
	TokensPerSec *float64  `json:"decode_tokens_per_second"`
	// PrefillAt is "local" or "peer:NAME" (sched.Result.PrefillAt).
	PrefillAt string `json:"prefill_at"`
}

// bucketAt returns the bucket for t, resetting it when it held an older
// step. The caller holds mu.
func (r *Recorder) bucketAt(t time.Time) *bucket {
	step := int64(SeriesStep / time.Second)
	start := t.Unix() / step * step
	b := &r.buckets[int(start/step)%seriesLen]
	if b.start != start {
		*b = bucket{start: start}
	}
	return b
}

func msOf(d time.Duration) *float64 {
	if d < 0 {
		d = 0
	}
	v := float64(d.Microseconds()) / 1000
	return &v
}

// Queue implements sched.Observer; it keeps nothing: the state reads the
// queue's depth live (Config.QueueDepth).
func (r *Recorder) Queue(depth int) {}

// Busy implements sched.Observer; it keeps nothing: the state reads the
// slots live (Config.Slots).
func (r *Recorder) Busy(slots int) {}

// Prefix implements sched.Observer: the cache hit rate counts admitted
// requests' prompt tokens and the cached ones among them.
func (r *Recorder) Prefix(prompt, cached int, source string) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tot.admittedPrompt += prompt
	r.tot.cached += cached
	switch source {
	case "store":
		r.tot.cachedStore += cached
	case "slot":
		r.tot.cachedSlot += cached
	}
	b := r.bucketAt(now)
	b.promptTokens += prompt
	b.cachedTk += cached
}

// Refused implements sched.Observer.
func (r *Recorder) Refused(reason string) {
	r.mu.Lock()
	r.tot.refused[reason]++
	r.mu.Unlock()
}

// InterToken implements sched.Observer (the recorder uses each request's
// decode span instead).
func (r *Recorder) InterToken(time.Duration) {}

// Finished implements sched.Observer.
func (r *Recorder) Finished(req *sched.Request, res sched.Result) {
	if req.PrefillOnly {
		return // a producer's prefill for a peer, not a client's request
	}
	start := req.Received
	if start.IsZero() {
		start = res.Queued
	}
	sum := RequestSummary{ID: req.ID, Route: req.Route, Done: res.Done, PromptTokens: res.PromptTokens,
		CachedTokens: res.CachedTokens, CacheSource: res.CacheSource, Generated: len(res.Generated),
		Finish: res.Finish.String(), PrefillAt: "local"}
	if res.PrefillAt != "" {
		sum.PrefillAt = "peer:" + res.PrefillAt
	}
	prefillFrom := res.Started
	if !res.RemoteDone.IsZero() {
		prefillFrom = res.RemoteDone
	}
	if !res.Restored.IsZero() {
		sum.RestoreMS = msOf(res.Restored.Sub(prefillFrom))
		prefillFrom = res.Restored
	}
	if !res.PrefillDone.IsZero() && !prefillFrom.IsZero() {
		sum.PrefillMS = msOf(res.PrefillDone.Sub(prefillFrom))
	}
	var ttft, decode time.Duration
	decodeN := 0
	if !res.FirstToken.IsZero() {
		ttft = res.FirstToken.Sub(start)
		sum.TTFTMS = msOf(ttft)
		if n := len(res.Generated) - 1; n > 0 && res.Done.After(res.FirstToken) {
			decodeN, decode = n, res.Done.Sub(res.FirstToken)
			v := float64(n) / decode.Seconds()
			sum.TokensPerSec = &v
		}
	}
	at := res.Done
	if at.IsZero() {
		at = r.now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &r.tot
	t.requests++
	t.promptTokens += res.PromptTokens
	t.generated += len(res.Generated)
	b := r.bucketAt(at)
	b.requests++
	if sum.TTFTMS != nil {
		t.ttftSum += ttft
		t.ttftN++
		b.ttftSum += ttft
		b.ttftN++
	}
	if decodeN > 0 {
		t.decodeTokens += decodeN
		t.decodeTime += decode
		b.decodeTokens += decodeN
		b.decodeTime += decode
	}
	r.recent = append(r.recent, sum)
	if len(r.recent) > recentLen {
		r.recent = append(r.recent[:0], r.recent[len(r.recent)-recentLen:]...)
	}
}

// Published implements sched.Observer.
func (r *Recorder) Published(res store.PublishResult, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.tot.publishErrors++
		return
	}
	r.tot.publishes++
	r.tot.publishBytes += res.BytesWritten
}

// PublishDropped implements sched.Observer.
func (r *Recorder) PublishDropped() {
	r.mu.Lock()
	r.tot.publishDropped++
	r.mu.Unlock()
}

// StoreBytes implements sched.Observer; it keeps nothing: the state reads
// the store's bytes live (Store.Stats).
func (r *Recorder) StoreBytes(n int64) {}

// Point is one bucket of the charts. A figure with nothing to measure in
// its bucket (no request finished, none admitted) is nil: the chart
// leaves a gap rather than drawing a zero.
type Point struct {
	// Start is the bucket's start (unix seconds).
	Start int64 `json:"t"`
	// Requests is the number of requests that finished in it.
	Requests int `json:"requests"`
	// TTFTMS is the mean time to first token of those requests.
	TTFTMS *float64 `json:"ttft_ms"`
	// TokensPerSecond is their decode tokens over their decode time.
	TokensPerSecond *float64 `json:"tokens_per_second"`
	// HitRate is cached over prompt tokens of requests admitted in it.
	HitRate *float64 `json:"hit_rate"`
}

// Series is the charts' data: measured, per Step, over Window, oldest
// first, ending with the bucket that holds now.
type Series struct {
	Tag     string  `json:"tag"`
	StepS   int     `json:"step_s"`
	WindowS int     `json:"window_s"`
	Points  []Point `json:"points"`
}

// series returns the buckets of the last SeriesWindow. The caller holds
// mu.
func (r *Recorder) series(now time.Time) Series {
	step := int64(SeriesStep / time.Second)
	last := now.Unix() / step * step
	s := Series{Tag: TagMeasured, StepS: int(step), WindowS: int(SeriesWindow / time.Second), Points: make([]Point, 0, seriesLen)}
	for i := seriesLen - 1; i >= 0; i-- {
		start := last - int64(i)*step
		p := Point{Start: start}
		if b := r.buckets[int(start/step)%seriesLen]; b.start == start {
			p.Requests = b.requests
			if b.ttftN > 0 {
				p.TTFTMS = msOf(b.ttftSum / time.Duration(b.ttftN))
			}
			if b.decodeTime > 0 {
				v := float64(b.decodeTokens) / b.decodeTime.Seconds()
				p.TokensPerSecond = &v
			}
			if b.promptTokens > 0 {
				v := float64(b.cachedTk) / float64(b.promptTokens)
				p.HitRate = &v
			}
		}
		s.Points = append(s.Points, p)
	}
	return s
}
