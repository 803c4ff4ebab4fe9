package sched

import (
	"context"
	"fmt"
	"slices"

	"github.com/muserhq/muser/store"
)

// publishJob is one finished request's new full blocks, copied out of its
// slot so the slot can serve the next request while the store writes.
type publishJob struct {
	reqID  string
	salt   []byte
	tokens []int32  // every full block of the sequence
	first  int      // first block not already in the store when copied
	blocks [][]byte // blocks first.. in order
	done   func(store.PublishResult, error)
}

// publisher writes jobs to the store in its own goroutine, and keeps the
// store within its byte budget.
type publisher struct {
	s     *Scheduler
	jobs  chan *publishJob
	done  chan struct{}
	bytes int64 // store bytes, tracked between gc runs
}

func newPublisher(s *Scheduler) *publisher {
	p := &publisher{s: s, jobs: make(chan *publishJob, s.cfg.PublishQueue), done: make(chan struct{})}
	if st, err := s.cfg.Store.Stats(); err == nil {
		p.bytes = st.Bytes
		s.obs.StoreBytes(p.bytes)
	}
	go p.run()
	return p
}

// export runs in its own goroutine, owning sl.seq: it copies the blocks
// the store lacks, frees the slot, and queues the publish. done, if not
// nil, is called with the publish's outcome (and the job is queued even if
// the queue is full).
func (s *Scheduler) export(sl *slot, req *Request, done func(store.PublishResult, error)) {
	job, err := s.copyBlocks(sl, req)
	// The job is queued before the slot is freed, so that Close, which
	// waits for every slot to be idle before it closes the queue, never
	// races a send.
	queued := false
	switch {
	case err != nil:
		s.log.Error("copying blocks to publish failed", "request_id", req.ID, "err", err)
	case job == nil:
		// The store holds every block already.
	case done != nil:
		job.done = done
		s.pub.jobs <- job
		queued = true
	default:
		select {
		case s.pub.jobs <- job:
			queued = true
		default:
			s.obs.PublishDropped()
			s.log.Warn("publish queue full; blocks not published", "request_id", req.ID, "blocks", len(job.blocks))
		}
	}
	s.freed <- sl.id // sl.seq is the loop's again
	if queued {
		return // the publisher ends the pending count and calls done
	}
	if done != nil {
		var res store.PublishResult
		if err == nil {
			var m store.Match
			m, err = s.cfg.Store.Match(s.cfg.Identity, req.Salt, req.Prompt)
			res.Pack = m.Pack
		}
		done(res, err)
	}
	s.addPending(-1)
}

// copyBlocks returns the job publishing sl's full blocks, or nil when the
// store already holds all of them.
func (s *Scheduler) copyBlocks(sl *slot, req *Request) (*publishJob, error) {
	b := s.block
	n := sl.seq.Len() / b * b
	tokens := slices.Clone(sl.seq.Tokens()[:n])
	m, err := s.cfg.Store.Match(s.cfg.Identity, req.Salt, tokens)
	if err != nil {
		return nil, err
	}
	if m.Tokens >= n {
		return nil, nil
	}
	job := &publishJob{reqID: req.ID, salt: slices.Clone(req.Salt), tokens: tokens, first: m.Blocks}
	for blk := m.Blocks; blk < n/b; blk++ {
		kv, err := sl.seq.ExportBlock(blk*b, b)
		if err != nil {
			return nil, err
		}
		job.blocks = append(job.blocks, kv)
	}
	return job, nil
}

func (p *publisher) run() {
	defer close(p.done)
	s := p.s
	for job := range p.jobs {
		// Publishing is not tied to any request: a job queued before
		// shutdown is written before the store closes.
		ctx := context.Background()
		res, err := s.cfg.Store.PublishPrefix(ctx, s.cfg.Identity, job.salt, job.tokens, func(blk int) ([]byte, error) {
			if blk < job.first || blk-job.first >= len(job.blocks) {
				return nil, fmt.Errorf("block %d was in the store when the request finished and is gone now", blk)
			}
			return job.blocks[blk-job.first], nil
		})
		s.obs.Published(res, err)
		if err != nil {
			s.log.Error("publish failed", "request_id", job.reqID, "tokens", len(job.tokens), "err", err)
		} else {
			s.log.Debug("published", "request_id", job.reqID, "pack", res.Pack.Short(), "tokens", len(job.tokens),
				"new", res.New, "chunks_written", res.ChunksWritten, "bytes_written", res.BytesWritten)
			p.bytes += res.BytesWritten
			if s.cfg.OnPublish != nil {
				s.cfg.OnPublish(PublishEvent{RequestID: job.reqID, Salt: job.salt, Tokens: len(job.tokens), Result: res})
			}
			p.budget(ctx)
		}
		if job.done != nil {
			job.done(res, err)
		}
		job.blocks = nil
		s.addPending(-1)
	}
}

// budget runs gc when the store may be over its byte budget.
func (p *publisher) budget(ctx context.Context) {
	s := p.s
	if s.cfg.StoreMaxBytes > 0 && p.bytes > s.cfg.StoreMaxBytes {
		rep, err := s.cfg.Store.GC(ctx, store.GCOptions{MaxBytes: s.cfg.StoreMaxBytes})
		if err != nil {
			s.log.Error("gc under the store's byte budget failed", "err", err)
		} else {
			s.log.Info("gc evicted packs to keep the store under its budget", "packs", len(rep.Removed.Packs),
				"before", rep.Before, "after", rep.After, "budget", s.cfg.StoreMaxBytes, "over_budget", rep.OverBudget)
			p.bytes = rep.After
		}
	}
	s.obs.StoreBytes(p.bytes)
}

// close waits for every queued job to be written.
func (p *publisher) close() {
	close(p.jobs)
	<-p.done
}
