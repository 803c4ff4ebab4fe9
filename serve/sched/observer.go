package sched

import (
	"time"

	"github.com/muserhq/muser/store"
)

// Observer receives the scheduler's measurements (the server turns them
// into Prometheus metrics). Its methods are called from the scheduler's
// goroutines and must not block.
type Observer interface {
	// Queue reports the number of requests waiting for a slot. It is
	// called with the queue locked, so that its reports arrive in order:
	// it must not call the Scheduler.
	Queue(depth int)
	// Busy reports the number of slots serving a request.
	Busy(slots int)
	// Prefix reports, once per admitted request, how many prompt tokens
	// were served from the cache and from where ("store", "slot", or ""
	// for a miss).
	Prefix(prompt, cached int, source string)
	// Refused reports a restore the store refused (fail closed), by the
	// receipt's reason code.
	Refused(reason string)
	// InterToken reports the time between two tokens of one request.
	InterToken(d time.Duration)
	// Finished reports a request that ended, however it ended (a
	// cancelled request's tokens count too).
	Finished(req *Request, res Result)
	// Published reports one publish of a finished request's blocks.
	Published(res store.PublishResult, err error)
	// PublishDropped reports a publish skipped because the publish queue
	// was full.
	PublishDropped()
	// StoreBytes reports the bytes the store holds (Stats.Bytes), after
	// publishes and garbage collection.
	StoreBytes(n int64)
}

// nopObserver discards everything.
type nopObserver struct{}

func (nopObserver) Queue(int)                            {}
func (nopObserver) Busy(int)                             {}
func (nopObserver) Prefix(int, int, string)              {}
func (nopObserver) Refused(string)                       {}
func (nopObserver) InterToken(time.Duration)             {}
func (nopObserver) Finished(*Request, Result)            {}
func (nopObserver) Published(store.PublishResult, error) {}
func (nopObserver) PublishDropped()                      {}
func (nopObserver) StoreBytes(int64)                     {}
