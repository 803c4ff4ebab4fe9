package cu

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// owner runs functions on one goroutine locked to its OS thread: the
// thread a CUDA context is current on. Callers on any goroutine hand it a
// function and wait for its result.
type owner struct {
	reqs chan *request // unbuffered: a send hands the function to the owner
	done chan struct{} // closed when the owner goroutine has torn down

	mu     sync.RWMutex // held for reading while sending; for writing to close reqs
	closed bool

	tid         int   // the owner's OS thread; written before start returns
	teardownErr error // written before done is closed
}

type request struct {
	f     func() error
	err   error
	panic *PanicError
	done  chan struct{}
}

// startOwner starts the owner goroutine, locks it to its thread and runs
// setup there. If setup fails, the goroutine ends with its thread still
// locked, so the runtime ends the thread too, and whatever setup left
// current on it goes with it; startOwner returns setup's error. Otherwise
// the owner runs requests until close, then teardown, on the same thread.
func startOwner(setup func() error, teardown func() error) (*owner, error) {
	o := &owner{reqs: make(chan *request), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread ends with the goroutine.
		o.tid = sysGettid()
		if err := setup(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		clean := false
		defer func() {
			if !clean { // a function called runtime.Goexit: this goroutine is ending
				o.abandon()
				o.teardownErr = teardown()
				close(o.done)
			}
		}()
		for r := range o.reqs {
			r.run()
		}
		clean = true
		o.teardownErr = teardown()
		close(o.done)
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return o, nil
}

// errGoexit is returned by do when its function called runtime.Goexit,
// which ends the owner goroutine (and with it the device).
var errGoexit = fmt.Errorf("%w: the function Do ran called runtime.Goexit (t.FailNow, t.Fatal or t.Skip on the device thread?)", ErrClosed)

func (r *request) run() {
	returned := false
	defer func() {
		if v := recover(); v != nil {
			r.panic = &PanicError{Value: v, Stack: debug.Stack()}
		} else if !returned {
			r.err = errGoexit
		}
		close(r.done)
	}()
	r.err = r.f()
	returned = true
}

// abandon closes the owner from its own goroutine as it ends through
// runtime.Goexit: a drainer answers ErrClosed to the callers already
// waiting to hand over, and later ones see closed.
func (o *owner) abandon() {
	drained := make(chan struct{})
	go func() {
		for r := range o.reqs {
			r.err = ErrClosed
			close(r.done)
		}
		close(drained)
	}()
	o.mu.Lock()
	if !o.closed {
		o.closed = true
		close(o.reqs)
	}
	o.mu.Unlock()
	<-drained
}

// onOwner reports whether the caller runs on the owner's thread, which
// only the owner goroutine does while it holds the thread locked. Where
// thread IDs are unknown (sysGettid returns -1) it reports false.
func (o *owner) onOwner() bool { return o.tid >= 0 && sysGettid() == o.tid }

// do runs f on the owner's thread and returns its error. A panic in f is
// raised again in the caller as a *PanicError.
func (o *owner) do(f func() error) error {
	if o.onOwner() {
		return ErrNested
	}
	r := &request{f: f, done: make(chan struct{})}
	o.mu.RLock()
	if o.closed {
		o.mu.RUnlock()
		return ErrClosed
	}
	o.reqs <- r
	o.mu.RUnlock()
	<-r.done
	if r.panic != nil {
		panic(r.panic)
	}
	return r.err
}

// close stops the owner after the requests already handed over, runs
// teardown and returns its error. Later calls return nil.
func (o *owner) close() error {
	if o.onOwner() {
		return ErrNested
	}
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		<-o.done
		return nil
	}
	o.closed = true
	close(o.reqs)
	o.mu.Unlock()
	<-o.done
	return o.teardownErr
}
