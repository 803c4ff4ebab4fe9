package progress

import (
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"
)

// MinInterval is the least time between two redraws.
const MinInterval = 100 * time.Millisecond

// Unit says what a Meter counts.
type Unit int

const (
	// Bytes are shown in binary units (KiB, MiB, ...).
	Bytes Unit = iota
	// Tokens are shown as a count with "tokens".
	Tokens
	// Chunks are shown as a count with "chunks".
	Chunks
)

// Meter is one status line. Its methods are safe for concurrent use; a
// nil or disabled Meter does nothing.
type Meter struct {
	mu      sync.Mutex
	w       io.Writer
	label   string
	unit    Unit
	total   int64
	done    int64
	start   time.Time
	last    time.Time
	drawn   bool
	delay   time.Duration
	now     func() time.Time
	enabled bool
	ownLine bool
}

// Options tune a Meter.
type Options struct {
	// Terminal enables drawing; use IsTerminal(w) for a real stream.
	Terminal bool
	// Delay holds the first draw back until the work has run this long
	// (a prefill shorter than a second shows nothing).
	Delay time.Duration
	// OwnLine starts the first draw on a new line and makes Finish erase
	// the line instead of ending it, for a status shown while other
	// output (a prompt's echo on stdout) waits on the same terminal.
	OwnLine bool
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// New returns a Meter that draws label's progress to w, counting unit up
// to total (0 or less: unknown, no percentage or ETA).
func New(w io.Writer, label string, unit Unit, total int64, opts Options) *Meter {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Meter{w: w, label: label, unit: unit, total: total, start: now(), now: now,
		delay: opts.Delay, enabled: opts.Terminal, ownLine: opts.OwnLine}
}

// SetTotal changes the total (when it becomes known late).
func (m *Meter) SetTotal(total int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.total = total
	m.mu.Unlock()
}

// Add counts n more done.
func (m *Meter) Add(n int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.done += n
	m.maybeDraw()
	m.mu.Unlock()
}

// Set records that done are done.
func (m *Meter) Set(done int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.done = done
	m.maybeDraw()
	m.mu.Unlock()
}

// Finish draws the final state and ends the line, if anything was drawn
// (with OwnLine it erases the line instead).
func (m *Meter) Finish() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.enabled || !m.drawn {
		return
	}
	if m.ownLine {
		fmt.Fprint(m.w, "\r\x1b[K")
	} else {
		m.draw(m.now())
		fmt.Fprintln(m.w)
	}
	m.enabled = false
}

func (m *Meter) maybeDraw() {
	if !m.enabled {
		return
	}
	now := m.now()
	if now.Sub(m.start) < m.delay || (m.drawn && now.Sub(m.last) < MinInterval) {
		return
	}
	m.draw(now)
}

func (m *Meter) draw(now time.Time) {
	if m.ownLine && !m.drawn {
		fmt.Fprintln(m.w)
	}
	m.last, m.drawn = now, true
	fmt.Fprintf(m.w, "\r%s\x1b[K", Line(m.label, m.unit, m.done, m.total, now.Sub(m.start)))
}

// Line renders one status line: label, done (of total, with the
// percentage), rate, and ETA when it can be estimated.
func Line(label string, unit Unit, done, total int64, elapsed time.Duration) string {
	s := label + ": " + amount(unit, done)
	if total > 0 {
		s += " / " + amount(unit, total) + fmt.Sprintf(" (%d%%)", int(math.Min(100, math.Floor(100*float64(done)/float64(total)))))
	}
	secs := elapsed.Seconds()
	if secs <= 0 || done <= 0 {
		return s
	}
	rate := float64(done) / secs
	s += ", " + rateString(unit, rate)
	if total > done {
		eta := time.Duration(float64(total-done) / rate * float64(time.Second))
		s += ", ETA " + formatETA(eta)
	}
	return s
}

func amount(unit Unit, n int64) string {
	switch unit {
	case Tokens:
		return fmt.Sprintf("%d tokens", n)
	case Chunks:
		return fmt.Sprintf("%d chunks", n)
	}
	return formatBytes(float64(n))
}

func rateString(unit Unit, r float64) string {
	switch unit {
	case Tokens:
		return fmt.Sprintf("%.1f tokens/s", r)
	case Chunks:
		return fmt.Sprintf("%.1f chunks/s", r)
	}
	return formatBytes(r) + "/s"
}

func formatBytes(n float64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%.0f B", n)
	}
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		n /= unit
		if n < unit {
			return fmt.Sprintf("%.1f %s", n, u)
		}
	}
	return fmt.Sprintf("%.1f PiB", n/unit)
}

// formatETA rounds to the second (to the minute past an hour).
func formatETA(d time.Duration) string {
	if d > time.Hour {
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Second).String()
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isTerminal(f)
}

// Writer counts the bytes written through it on a Meter.
type Writer struct {
	W io.Writer
	M *Meter
}

// Write writes p and counts what was written.
func (w Writer) Write(p []byte) (int, error) {
	n, err := w.W.Write(p)
	w.M.Add(int64(n))
	return n, err
}

// Reader counts the bytes read through it on a Meter.
type Reader struct {
	R io.Reader
	M *Meter
}

// Read reads into p and counts what was read.
func (r Reader) Read(p []byte) (int, error) {
	n, err := r.R.Read(p)
	r.M.Add(int64(n))
	return n, err
}
