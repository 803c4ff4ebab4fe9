package cuda

import (
	"slices"
	"sync"
	"time"

	"github.com/muserhq/muser/infer/engine/cuda/internal/cu"
)

// KernelTime is the device time one kernel took over the forward passes
// profiled, summed, and how many launches it was.
type KernelTime struct {
	Kernel   string
	Launches int
	Time     time.Duration
}

// profiler times every launch with a pair of events (Options.Profile).
// Recording events between launches costs a little device time, so the
// totals are for finding where time goes, not for benchmarks.
type profiler struct {
	mu     sync.Mutex
	events []cu.Event // pool, reused
	used   int
	names  []string
	totals map[string]*KernelTime
}

// begin records the start event of a launch of kernel; end, its end.
func (p *profiler) begin(c *cu.Ctx, kernel string) error {
	for len(p.events) < p.used+2 {
		e, err := c.NewEvent()
		if err != nil {
			return err
		}
		p.events = append(p.events, e)
	}
	p.names = append(p.names, kernel)
	p.used += 2
	return c.Record(p.events[p.used-2], c.Stream())
}

func (p *profiler) end(c *cu.Ctx) error { return c.Record(p.events[p.used-1], c.Stream()) }

// collect waits for the recorded launches and adds their times up.
func (p *profiler) collect(c *cu.Ctx) error {
	if p.used == 0 {
		return nil
	}
	if err := c.WaitEvent(p.events[p.used-1]); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.totals == nil {
		p.totals = map[string]*KernelTime{}
	}
	for i, name := range p.names {
		d, err := c.Elapsed(p.events[2*i], p.events[2*i+1])
		if err != nil {
			return err
		}
		kt := p.totals[name]
		if kt == nil {
			kt = &KernelTime{Kernel: name}
			p.totals[name] = kt
		}
		kt.Launches++
		kt.Time += d
	}
	p.used, p.names = 0, p.names[:0]
	return nil
}

// Profile returns the device time of each kernel over every forward pass
// since the device was opened with Options.Profile (or since the last
// Profile call), most time first, and resets it. Without
// Options.Profile it returns nil.
func (d *Device) Profile() []KernelTime {
	if d.prof == nil {
		return nil
	}
	p := d.prof
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []KernelTime
	for _, kt := range p.totals {
		out = append(out, *kt)
	}
	p.totals = nil
	slices.SortFunc(out, func(a, b KernelTime) int { return int(b.Time - a.Time) })
	return out
}
