package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool runs work on a fixed set of goroutines: Threads()-1 workers plus the
// goroutine that calls Parallel or MatMul, which works too. Work is handed
// out in indivisible items (an output row tile, a head, a token); which
// goroutine computes an item never changes what it computes, so results
// never depend on Threads().
//
// A Pool may be used from several goroutines at once; calls then share the
// workers. Close stops the workers; a closed Pool still works, on the
// calling goroutine alone.
type Pool struct {
	threads int
	jobs    chan *job
	once    sync.Once
	closed  atomic.Bool
}

// job is one Parallel call: items [0,n) handed out by an atomic counter.
type job struct {
	n    int
	f    func(i int)
	next atomic.Int64
	done sync.WaitGroup
}

// run takes items until none are left.
func (j *job) run() {
	for {
		i := int(j.next.Add(1) - 1)
		if i >= j.n {
			return
		}
		j.f(i)
		j.done.Done()
	}
}

// NewPool returns a pool of threads goroutines. threads < 1 means
// runtime.GOMAXPROCS(0).
func NewPool(threads int) *Pool {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads}
	if threads > 1 {
		p.jobs = make(chan *job, threads)
		for w := 1; w < threads; w++ {
			go p.worker()
		}
	}
	return p
}

func (p *Pool) worker() {
	for j := range p.jobs {
		j.run()
	}
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
	j := &job{n: n, f: f}
	j.done.Add(n)
	helpers := min(p.threads-1, n-1)
	p.send(j, helpers)
	j.run()
	j.done.Wait()
}

// send offers j to up to k workers without blocking: a worker busy with
// another call's job simply does not help with this one.
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
