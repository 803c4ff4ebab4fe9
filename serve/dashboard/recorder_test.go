package dashboard

import (
	"testing"
	"time"

	"github.com/muserhq/muser/serve/sched"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// finished builds a request and result that arrived at at, took ttft to
// its first token and decoded n more tokens over decode.
func finished(at time.Time, ttft time.Duration, n int, decode time.Duration) (*sched.Request, sched.Result) {
	res := sched.Result{PromptTokens: 10, Queued: at, Started: at, FirstToken: at.Add(ttft),
		Generated: make([]int32, n+1), Finish: sched.FinishStop}
	res.PrefillDone = res.FirstToken
	res.Done = res.FirstToken.Add(decode)
	return &sched.Request{ID: "r", Route: "POST /v1/chat/completions", Received: at}, res
}

// TestRecorderSeries: each bucket averages what finished in it; a bucket
// with nothing measured is nil (a gap, not a zero); buckets older than the
// window drop out.
func TestRecorderSeries(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	r := newRecorder(clk.now)
	t0 := clk.t
	// Two requests in the first bucket: TTFT 100 and 300 ms; 10 tokens
	// over 1 s and 30 over 1 s.
	r.Prefix(100, 50, "store")
	r.Finished(finished(t0, 100*time.Millisecond, 10, time.Second))
	r.Finished(finished(t0, 300*time.Millisecond, 30, time.Second))
	// One in the third bucket: a miss.
	clk.t = t0.Add(2 * SeriesStep)
	r.Prefix(100, 0, "")
	r.Finished(finished(clk.t, 50*time.Millisecond, 0, 0))

	s := r.series(clk.t)
	if len(s.Points) != seriesLen {
		t.Fatalf("points: got %d, want %d", len(s.Points), seriesLen)
	}
	last, mid, first := s.Points[seriesLen-1], s.Points[seriesLen-2], s.Points[seriesLen-3]
	tests := []struct {
		name string
		got  *float64
		want float64 // -1: nil
	}{
		{"first ttft", first.TTFTMS, 200},
		{"first tokens/s", first.TokensPerSecond, 20},
		{"first hit rate", first.HitRate, 0.5},
		{"empty bucket ttft", mid.TTFTMS, -1},
		{"empty bucket tokens/s", mid.TokensPerSecond, -1},
		{"empty bucket hit rate", mid.HitRate, -1},
		{"last ttft", last.TTFTMS, 50},
		{"last tokens/s (one token: no decode)", last.TokensPerSecond, -1},
		{"last hit rate", last.HitRate, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			switch {
			case tc.want < 0 && tc.got != nil:
				t.Errorf("got %v, want nil", *tc.got)
			case tc.want >= 0 && tc.got == nil:
				t.Errorf("got nil, want %v", tc.want)
			case tc.want >= 0 && *tc.got != tc.want:
				t.Errorf("got %v, want %v", *tc.got, tc.want)
			}
		})
	}
	if first.Requests != 2 || mid.Requests != 0 || last.Requests != 1 {
		t.Errorf("requests per bucket: got %d %d %d, want 2 0 1", first.Requests, mid.Requests, last.Requests)
	}
	if want := t0.Unix() / 5 * 5; first.Start != want {
		t.Errorf("first bucket start: got %d, want %d", first.Start, want)
	}

	// A window later, the first bucket's slot is reused: the old figures
	// are gone, the totals stay.
	clk.t = t0.Add(SeriesWindow)
	r.Finished(finished(clk.t, 10*time.Millisecond, 1, time.Second))
	s = r.series(clk.t)
	n := 0
	for _, p := range s.Points {
		n += p.Requests
	}
	if n != 2 {
		t.Errorf("requests in the window after it moved: got %d, want 2 (the third bucket's and the new one)", n)
	}
	if p := s.Points[seriesLen-1]; p.TTFTMS == nil || *p.TTFTMS != 10 {
		t.Errorf("new bucket ttft: got %v, want 10", p.TTFTMS)
	}
	if r.tot.requests != 4 || r.tot.cached != 50 || r.tot.admittedPrompt != 200 {
		t.Errorf("totals: requests %d cached %d prompt %d, want 4 50 200", r.tot.requests, r.tot.cached, r.tot.admittedPrompt)
	}
}

// TestRecorderRecent keeps the last recentLen requests, and skips a
// producer's prefill-only requests.
func TestRecorderRecent(t *testing.T) {
	clk := &fakeClock{t: time.Unix(2_000_000, 0)}
	r := newRecorder(clk.now)
	for i := range recentLen + 5 {
		req, res := finished(clk.t, time.Millisecond, 2, time.Millisecond)
		req.ID = string(rune('a' + i))
		r.Finished(req, res)
	}
	req, res := finished(clk.t, time.Millisecond, 0, 0)
	req.PrefillOnly = true
	r.Finished(req, res)
	if len(r.recent) != recentLen || r.recent[0].ID != string(rune('a'+5)) || r.recent[recentLen-1].ID != string(rune('a'+recentLen+4)) {
		t.Errorf("recent: got %d, first %q last %q; want %d from %q to %q", len(r.recent), r.recent[0].ID,
			r.recent[len(r.recent)-1].ID, recentLen, string(rune('a'+5)), string(rune('a'+recentLen+4)))
	}
	if r.tot.requests != recentLen+5 {
		t.Errorf("requests: got %d, want %d (the prefill-only one not counted)", r.tot.requests, recentLen+5)
	}
}

// TestFigureTags: the constructors set the tag, and an unavailable figure
// carries no value.
func TestFigureTags(t *testing.T) {
	for _, tc := range []struct {
		f       Figure
		tag     string
		hasVal  bool
		hasWhy  bool
		hasFrom bool
	}{
		{Measured(1, "ms", "now", "x"), TagMeasured, true, false, true},
		{Configured(2, "slots", "--parallel"), TagConfigured, true, false, true},
		{Unavailable("ms", "no request yet"), TagUnavailable, false, true, false},
	} {
		if tc.f.Tag != tc.tag || (tc.f.Value != nil) != tc.hasVal || (tc.f.Reason != "") != tc.hasWhy || (tc.f.Source != "") != tc.hasFrom {
			t.Errorf("got %+v, want tag %s, value %v, reason %v, source %v", tc.f, tc.tag, tc.hasVal, tc.hasWhy, tc.hasFrom)
		}
	}
}
