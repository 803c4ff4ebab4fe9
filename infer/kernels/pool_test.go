package kernels

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoolParallel(t *testing.T) {
	for _, threads := range []int{1, 2, 7} {
		p := NewPool(threads)
		if got := p.Threads(); got != threads {
			t.Errorf("Threads() = %d, want %d", got, threads)
		}
		for _, n := range []int{0, 1, 2, 100, 1000} {
			hits := make([]int32, n)
			p.Parallel(n, func(i int) { atomic.AddInt32(&hits[i], 1) })
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("threads %d, n %d: item %d ran %d times, want 1", threads, n, i, h)
				}
			}
		}
		p.Close()
		p.Close() // idempotent
		ran := 0
		p.Parallel(5, func(int) { ran++ }) // after Close: on the caller alone
		if ran != 5 {
			t.Errorf("after Close: ran %d items, want 5", ran)
		}
	}
}

// TestPoolConcurrentCallers runs MatMul from several goroutines on one pool
// at once and checks every result against a serial run.
func TestPoolConcurrentCallers(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	serial := NewPool(1)
	defer serial.Close()
	m := benchMatrixT(t)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			n := 1 + g*3
			x := randomActs(rngFor(uint64(g)), n*m.Cols)
			want := make([]float32, n*m.Rows)
			serial.MatMul(want, m, x, n)
			for rep := 0; rep < 5; rep++ {
				got := make([]float32, n*m.Rows)
				p.MatMul(got, m, x, n)
				bitsEqual(t, "concurrent MatMul", got, want)
			}
		}(g)
	}
	wg.Wait()
}

// TestPoolWorkersHelp requires a worker to take part in every call, whether
// it was spinning when the call came (no gap) or had parked (a gap longer
// than spinFor): the two items of each call meet at a barrier, which only
// two goroutines running them at once can pass. Calls from two goroutines
// at once, then a Close while workers spin, must still run every item.
func TestPoolWorkersHelp(t *testing.T) {
	for _, tc := range []struct {
		name string
		gap  time.Duration
	}{
		{"spinning", 0},
		{"parked", 3 * spinFor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPool(2)
			defer p.Close()
			for call := 0; call < 50; call++ {
				time.Sleep(tc.gap)
				var arrived sync.WaitGroup
				arrived.Add(2)
				met := make(chan struct{})
				go func() { arrived.Wait(); close(met) }()
				p.Parallel(2, func(int) {
					arrived.Done()
					select {
					case <-met:
					case <-time.After(30 * time.Second):
						t.Errorf("call %d: no worker took the second item in 30 s", call)
					}
				})
				if t.Failed() {
					return
				}
			}
		})
	}
	t.Run("two callers, then close", func(t *testing.T) {
		p := NewPool(3)
		var wg sync.WaitGroup
		var total atomic.Int64
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for call := 0; call < 200; call++ {
					p.Parallel(7, func(int) { total.Add(1) })
				}
			}()
		}
		wg.Wait()
		p.Close()
		p.Parallel(7, func(int) { total.Add(1) })
		if got, want := total.Load(), int64(2*200*7+7); got != want {
			t.Errorf("ran %d items, want %d", got, want)
		}
	})
}
