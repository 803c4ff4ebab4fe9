package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time       { return c.t }
func (c *fakeClock) step(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock                { return &fakeClock{t: time.Unix(1_800_000_000, 0)} }
func frames(out string) []string          { return strings.Split(strings.TrimSuffix(out, "\n"), "\r")[1:] }
func lastFrame(out string) string {
	f := frames(out)
	return strings.TrimSuffix(f[len(f)-1], "\x1b[K\n")
}
func strip(frame string) string { return strings.TrimSuffix(frame, "\x1b[K") }
func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		name        string
		unit        Unit
		done, total int64
		elapsed     time.Duration
		want        string
	}{
		{"bytes half", Bytes, 512 << 20, 1 << 30, 2 * time.Second, "verify: 512.0 MiB / 1.0 GiB (50%), 256.0 MiB/s, ETA 2s"},
		{"no total", Bytes, 3 << 10, 0, time.Second, "verify: 3.0 KiB, 3.0 KiB/s"},
		{"nothing yet", Bytes, 0, 100, time.Second, "verify: 0 B / 100 B (0%)"},
		{"tokens", Tokens, 300, 1200, 3 * time.Second, "verify: 300 tokens / 1200 tokens (25%), 100.0 tokens/s, ETA 9s"},
		{"chunks done", Chunks, 64, 64, 4 * time.Second, "verify: 64 chunks / 64 chunks (100%), 16.0 chunks/s"},
		{"long eta", Bytes, 1, 7200, time.Second, "verify: 1 B / 7.0 KiB (0%), 1 B/s, ETA 2h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Line("verify", tc.unit, tc.done, tc.total, tc.elapsed); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMeterThrottlesAndFinishes(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	m := New(&buf, "push", Bytes, 1000, Options{Terminal: true, Now: c.now})
	m.Add(100) // first draw at once
	for range 10 {
		c.step(9 * time.Millisecond)
		m.Add(10) // within MinInterval: no redraw
	}
	if n := len(frames(buf.String())); n != 1 {
		t.Fatalf("after 11 updates within %v: %d frames, want 1", MinInterval, n)
	}
	c.step(MinInterval)
	m.Add(100)
	fs := frames(buf.String())
	if len(fs) != 2 || !contains(strip(fs[1]), "300 B / 1000 B (30%)", "ETA") {
		t.Fatalf("frames %q: want a second one at 300 B of 1000 B with an ETA", fs)
	}
	m.Set(1000)
	m.Finish()
	out := buf.String()
	if !strings.HasSuffix(out, "\x1b[K\n") || !contains(lastFrame(out), "1000 B / 1000 B (100%)") {
		t.Fatalf("after Finish: %q; want a final 100%% frame and a newline", out)
	}
	n := buf.Len()
	m.Add(5)
	m.Finish()
	if buf.Len() != n {
		t.Errorf("after Finish the meter drew again: %q", buf.String()[n:])
	}
}

func TestMeterSilent(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		work time.Duration
	}{
		{"not a terminal", Options{Terminal: false}, 5 * time.Second},
		{"shorter than the delay", Options{Terminal: true, Delay: time.Second}, 900 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			c := newClock()
			tc.opts.Now = c.now
			m := New(&buf, "prefill", Tokens, 500, tc.opts)
			for range 10 {
				c.step(tc.work / 10)
				m.Add(50)
			}
			m.Finish()
			if buf.Len() != 0 {
				t.Errorf("got output %q, want none", buf.String())
			}
		})
	}
	var nilMeter *Meter
	nilMeter.Add(1)
	nilMeter.Finish()
}

func TestMeterDelay(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	m := New(&buf, "prefill", Tokens, 500, Options{Terminal: true, Delay: time.Second, Now: c.now})
	c.step(500 * time.Millisecond)
	m.Add(100)
	if buf.Len() != 0 {
		t.Fatalf("before the delay: %q, want nothing", buf.String())
	}
	c.step(600 * time.Millisecond)
	m.Add(100)
	if !contains(buf.String(), "200 tokens / 500 tokens (40%)") {
		t.Fatalf("after the delay: %q, want 200 of 500 tokens", buf.String())
	}
}

func TestCountingReaderWriter(t *testing.T) {
	var buf, out bytes.Buffer
	c := newClock()
	m := New(&buf, "export", Bytes, 0, Options{Terminal: true, Now: c.now})
	w := Writer{W: &out, M: m}
	w.Write([]byte("hello"))
	r := Reader{R: strings.NewReader("abc"), M: m}
	p := make([]byte, 8)
	r.Read(p)
	c.step(time.Second)
	m.Finish()
	if !contains(lastFrame(buf.String()), "export: 8 B") {
		t.Errorf("got %q, want 8 B counted", buf.String())
	}
}

func TestIsTerminal(t *testing.T) {
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is a terminal")
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Errorf("%s is a terminal", os.DevNull)
	}
}

func TestMeterOwnLine(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	m := New(&buf, "prefill", Tokens, 100, Options{Terminal: true, OwnLine: true, Now: c.now})
	c.step(time.Second)
	m.Set(50)
	m.Finish()
	want := "\n\rprefill: 50 tokens / 100 tokens (50%), 50.0 tokens/s, ETA 1s\x1b[K\r\x1b[K"
	if buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
}
