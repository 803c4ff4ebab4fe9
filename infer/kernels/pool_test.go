package kernels

import (
	"sync"
	"sync/atomic"
	"testing"
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
