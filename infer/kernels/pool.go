package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs work on a fixed set of goroutines: Threads()-1 workers plus the
// goroutine that calls Parallel or MatMul, which works too. Work is handed
// out in indivisible items (an output row tile, a head, a token); which
// goroutine computes an item never changes what it computes, so results
// never depend on Threads().
//
// A decode step calls Parallel a few hundred times, tens of microseconds
// apart. Waking a parked goroutine costs about as much on a virtual
// machine, so a worker that has finished an item keeps looking for the
// next call's items for a while (spinFor) before it parks, and the caller
// waits for the last items of its call the same way before it parks. That
// spinning happens only where every goroutine of the pool can have a CPU
// (Threads() ≤ GOMAXPROCS); elsewhere a spinning goroutine would take the
// CPU from one that works.
//
// A Pool may be used from several goroutines at once; calls then share the
// workers. Close stops the workers; a closed Pool still works, on the
// calling goroutine alone.
type Pool struct {
	threads int
	spin    time.Duration
	jobs    chan *job           // parked workers wait here
	offer   atomic.Pointer[job] // the newest call, for workers that spin
	spinner atomic.Int32        // workers spinning now
	once    sync.Once
	closed  atomic.Bool
}

// spinFor is how long a worker looks for new items, and a caller for the
// end of its call, before parking: longer than the gaps between the
// Parallel calls of a decode step, short beside a scheduler's time slice.
const spinFor = 100 * time.Microsecond

// job is one Parallel call: items [0,n) handed out by an atomic counter;
// left counts the items not yet finished, and fin is closed when the last
// one finishes.
type job struct {
	n    int
	f    func(i int)
	next atomic.Int64
	left atomic.Int64
	fin  chan struct{}
}

// open reports whether j has items nobody has taken yet.
func (j *job) open() bool { return j.next.Load() < int64(j.n) }

// run takes items until none are left.
func (j *job) run() {
	for {
		i := int(j.next.Add(1) - 1)
		if i >= j.n {
			return
		}
		j.f(i)
		if j.left.Add(-1) == 0 {
			close(j.fin)
		}
	}
}

// wait returns when every item of j has finished, spinning for up to spin
// before it parks. (wait and look write their polling loops out: one
// helper taking the condition as a closure measured 4–6% slower decode.)
func (j *job) wait(spin time.Duration) {
	if spin > 0 {
		start := time.Now()
		for k := 1; j.left.Load() != 0; k++ {
			if k%64 == 0 && time.Since(start) > spin {
				break
			}
		}
	}
	<-j.fin
}

// NewPool returns a pool of threads goroutines. threads < 1 means
// runtime.GOMAXPROCS(0).
func NewPool(threads int) *Pool {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads}
	if threads <= runtime.GOMAXPROCS(0) {
		p.spin = spinFor
	}
	if threads > 1 {
		p.jobs = make(chan *job, threads)
		for w := 1; w < threads; w++ {
			go p.worker()
		}
	}
	return p
}

func (p *Pool) worker() {
	for {
		if j := p.look(); j != nil {
			j.run()
			continue
		}
		j, ok := <-p.jobs
		if !ok {
			return
		}
		j.run()
	}
}

// look spins for up to p.spin waiting for a call with items left and
// returns it, or nil when none came (or the pool closed). A worker counts
// itself in p.spinner while it looks; Parallel stores its job in p.offer
// before it reads p.spinner, and look reads p.offer once more after it has
// stopped counting itself, so a call that saw the worker spinning (and so
// did not wake a parked one) is always seen by it.
func (p *Pool) look() *job {
	if p.spin <= 0 {
		return nil
	}
	p.spinner.Add(1)
	start := time.Now()
	for k := 1; !p.closed.Load(); k++ {
		if j := p.offer.Load(); j != nil && j.open() {
			p.spinner.Add(-1)
			return j
		}
		if k%64 == 0 && time.Since(start) > p.spin {
			break
		}
	}
	p.spinner.Add(-1)
	if j := p.offer.Load(); j != nil && j.open() {
		return j
	}
	return nil
}

// Threads returns the number of goroutines that work on a call, the
// caller's included.
func (p *Pool) Threads() int { return p.threads }

// Close stops the pool's workers. It is safe to call more than once. Calls
// made after Close run on the calling goroutine alone.
func (p *Pool) Close() {
	p.once.Do(func() {
		p.closed.Store(true)
		if p.jobs != nil {
			close(p.jobs)
		}
	})
}

// Parallel runs f(i) for every i in [0,n) and returns when all have
// returned. Calls of f may run concurrently, in any order, on any of the
// pool's goroutines; f must therefore only write to state owned by item i.
func (p *Pool) Parallel(n int, f func(i int)) {
	if n <= 0 {
		return
	}
	if n == 1 || p.threads == 1 || p.closed.Load() {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	j := &job{n: n, f: f, fin: make(chan struct{})}
	j.left.Store(int64(n))
	helpers := min(p.threads-1, n-1)
	p.offer.Store(j)
	p.send(j, helpers-int(p.spinner.Load()))
	j.run()
	j.wait(p.spin)
	p.offer.CompareAndSwap(j, nil) // let f's captures go
}

// send offers j to up to k parked workers without blocking: a worker busy
// with another call's job simply does not help with this one.
func (p *Pool) send(j *job, k int) {
	defer func() {
		// Close raced with this call: the caller finishes the job alone.
		_ = recover()
	}()
	for w := 0; w < k; w++ {
		select {
		case p.jobs <- j:
		default:
			return
		}
	}
}
