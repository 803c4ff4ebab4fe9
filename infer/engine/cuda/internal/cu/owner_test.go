package cu

import (
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func needTid(t *testing.T) {
	t.Helper()
	if sysGettid() < 0 {
		t.Skipf("thread IDs are not read on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
}

func newTestOwner(t *testing.T) *owner {
	t.Helper()
	o, err := startOwner(func() error { return nil }, func() error { return nil })
	if err != nil {
		t.Fatalf("startOwner: %v", err)
	}
	t.Cleanup(func() { _ = o.close() })
	return o
}

// TestOwnerOneThread runs functions from many goroutines and checks that
// each ran on the owner's OS thread, one at a time.
func TestOwnerOneThread(t *testing.T) {
	needTid(t)
	var setupTid int
	o, err := startOwner(func() error { setupTid = sysGettid(); return nil }, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	if setupTid != o.tid {
		t.Fatalf("setup ran on thread %d, owner is %d", setupTid, o.tid)
	}
	const goroutines, calls = 8, 200
	var (
		mu      sync.Mutex
		tids    = map[int]int{}
		running int // functions running now; touched only inside do
		overlap bool
	)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range calls {
				err := o.do(func() error {
					running++
					if running != 1 {
						overlap = true
					}
					mu.Lock()
					tids[sysGettid()]++
					mu.Unlock()
					running--
					return nil
				})
				if err != nil {
					t.Errorf("do: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if overlap {
		t.Errorf("two functions ran at once")
	}
	if len(tids) != 1 || tids[o.tid] != goroutines*calls {
		t.Errorf("functions ran on threads %v, want all %d on %d", tids, goroutines*calls, o.tid)
	}
}

func TestOwnerResult(t *testing.T) {
	o := newTestOwner(t)
	if err := o.do(func() error { return io.ErrUnexpectedEOF }); err != io.ErrUnexpectedEOF {
		t.Errorf("do returned %v, want the function's error %v", err, io.ErrUnexpectedEOF)
	}
	n := 0
	if err := o.do(func() error { n = 42; return nil }); err != nil || n != 42 {
		t.Errorf("do = %v with n = %d, want nil and 42", err, n)
	}
}

func TestOwnerPanic(t *testing.T) {
	o := newTestOwner(t)
	var got any
	func() {
		defer func() { got = recover() }()
		_ = o.do(func() error { panic(io.EOF) })
	}()
	pe, ok := got.(*PanicError)
	if !ok {
		t.Fatalf("do panicked with %T %v, want a *PanicError", got, got)
	}
	if pe.Value != io.EOF || !errors.Is(pe, io.EOF) {
		t.Errorf("PanicError.Value = %v, want io.EOF", pe.Value)
	}
	if !strings.Contains(string(pe.Stack), "TestOwnerPanic") {
		t.Errorf("PanicError.Stack does not show the panicking function:\n%s", pe.Stack)
	}
	if err := o.do(func() error { return nil }); err != nil {
		t.Errorf("do after a panic = %v, want the owner still serving", err)
	}
}

func TestOwnerNested(t *testing.T) {
	needTid(t)
	o := newTestOwner(t)
	var inner, closeErr error
	if err := o.do(func() error {
		inner = o.do(func() error { return nil })
		closeErr = o.close()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if inner != ErrNested {
		t.Errorf("do inside do = %v, want ErrNested", inner)
	}
	if closeErr != ErrNested {
		t.Errorf("close inside do = %v, want ErrNested", closeErr)
	}
}

func TestOwnerClose(t *testing.T) {
	tornDown := 0
	o, err := startOwner(func() error { return nil }, func() error { tornDown++; return io.ErrClosedPipe })
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := o.do(func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("do = %v, ran = %v", err, ran)
	}
	if err := o.close(); err != io.ErrClosedPipe {
		t.Errorf("close = %v, want teardown's error %v", err, io.ErrClosedPipe)
	}
	if err := o.close(); err != nil {
		t.Errorf("second close = %v, want nil", err)
	}
	if tornDown != 1 {
		t.Errorf("teardown ran %d times, want 1", tornDown)
	}
	if err := o.do(func() error { t.Error("function ran after close"); return nil }); err != ErrClosed {
		t.Errorf("do after close = %v, want ErrClosed", err)
	}
}

// TestOwnerCloseWhileBusy closes the owner while goroutines keep calling
// do: every call either runs or returns ErrClosed, and none hangs.
func TestOwnerCloseWhileBusy(t *testing.T) {
	o, err := startOwner(func() error { return nil }, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	started := make(chan struct{})
	var once sync.Once
	for range 4 {
		wg.Go(func() {
			for {
				err := o.do(func() error { once.Do(func() { close(started) }); return nil })
				if err == ErrClosed {
					return
				}
				if err != nil {
					t.Errorf("do = %v, want nil or ErrClosed", err)
					return
				}
			}
		})
	}
	<-started
	if err := o.close(); err != nil {
		t.Errorf("close = %v", err)
	}
	wg.Wait()
}

func TestOwnerSetupFails(t *testing.T) {
	tornDown := false
	o, err := startOwner(func() error { return io.ErrNoProgress }, func() error { tornDown = true; return nil })
	if err != io.ErrNoProgress || o != nil {
		t.Errorf("startOwner = %v, %v; want nil, setup's error", o, err)
	}
	if tornDown {
		t.Errorf("teardown ran after a failed setup")
	}
}

func BenchmarkOwnerDo(b *testing.B) {
	o, err := startOwner(func() error { return nil }, func() error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	defer o.close()
	f := func() error { return nil }
	for b.Loop() {
		if err := o.do(f); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOwnerGoexit checks that a function ending its goroutine with
// runtime.Goexit (as t.FailNow does) closes the owner, tears it down on
// its thread, and leaves no caller hanging.
func TestOwnerGoexit(t *testing.T) {
	needTid(t)
	var ownerTid, teardownTid, tornDown int
	o, err := startOwner(func() error { ownerTid = sysGettid(); return nil }, func() error {
		teardownTid = sysGettid()
		tornDown++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = o.do(func() error { runtime.Goexit(); return nil })
	if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "Goexit") {
		t.Errorf("do of a function calling Goexit = %v, want ErrClosed naming Goexit", err)
	}
	if err := o.do(func() error { t.Error("function ran after Goexit"); return nil }); err != ErrClosed {
		t.Errorf("do after Goexit = %v, want ErrClosed", err)
	}
	if err := o.close(); err != nil {
		t.Errorf("close after Goexit = %v, want nil", err)
	}
	if tornDown != 1 || teardownTid != ownerTid {
		t.Errorf("teardown ran %d times, on thread %d; want once, on the owner's thread %d", tornDown, teardownTid, ownerTid)
	}
}
