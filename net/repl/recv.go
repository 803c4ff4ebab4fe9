package repl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/quic-go/quic-go"
)

// inbound is a transfer this node receives: the chunks it asked for and
// what has arrived.
type inbound struct {
	n    *Node
	peer string
	pack pack.Digest

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu        sync.Mutex
	sizes     map[pack.Digest]uint32 // needed chunk → size
	state     map[pack.Digest]uint8  // 1 arriving, 2 stored
	remaining int
	bytes     int64
	streams   []*quic.ReceiveStream
	sink      *store.ChunkSink // nil when no chunk is needed
	all       chan struct{}    // closed when every needed chunk is stored
	wg        sync.WaitGroup
	watch     *stallWatch // chunk bytes read and chunks stored are progress
}

// progressReader records every read that returns bytes as progress.
type progressReader struct {
	r     io.Reader
	watch *stallWatch
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.watch.progress()
	}
	return n, err
}

// fail ends the transfer with err (the first failure wins).
func (in *inbound) fail(err error) { in.cancel(err) }

// interruption is a transfer cut by its streams or connection going away
// (the sender aborting or vanishing, this node closing or revoking the
// connection): recorded as truncated, never taken for this node's verdict
// on the bytes, whatever error the connection reports.
type interruption struct{ err error }

func (e *interruption) Error() string { return e.err.Error() }
func (e *interruption) Unwrap() error { return e.err }

// serveStream stores the chunks of one chunk stream.
func (in *inbound) serveStream(rs *quic.ReceiveStream) {
	in.mu.Lock()
	if in.ctx.Err() != nil {
		in.mu.Unlock()
		rs.CancelRead(quic.StreamErrorCode(wire.CodeCanceled))
		return
	}
	if len(in.streams) >= MaxStreams {
		// Each stream holds up to a chunk in memory: bound them.
		in.mu.Unlock()
		rs.CancelRead(quic.StreamErrorCode(wire.CodeProtocol))
		in.fail(in.n.refuse(in.peer, in.pack, pack.ReasonOversize, nil,
			"the sender opened more than %d chunk streams for one transfer", MaxStreams))
		return
	}
	in.streams = append(in.streams, rs)
	in.wg.Add(1)
	in.mu.Unlock()
	defer in.wg.Done()
	r := progressReader{rs, in.watch}
	for {
		id, size, err := wire.ReadChunkHeader(r)
		if err == io.EOF {
			return
		}
		if err != nil {
			in.streamFailed(rs, err, "reading a chunk header")
			return
		}
		in.mu.Lock()
		want, needed := in.sizes[id]
		st := in.state[id]
		if needed && st == 0 {
			in.state[id] = 1
		}
		in.mu.Unlock()
		switch {
		case !needed:
			in.fail(in.n.refuse(in.peer, in.pack, pack.ReasonMalformed, nil, "chunk %s was not asked for", id.Short()))
			rs.CancelRead(quic.StreamErrorCode(wire.CodeProtocol))
			return
		case st != 0:
			in.fail(in.n.refuse(in.peer, in.pack, pack.ReasonMalformed, nil, "chunk %s sent twice", id.Short()))
			rs.CancelRead(quic.StreamErrorCode(wire.CodeProtocol))
			return
		case uint64(size) != uint64(want):
			reason := pack.ReasonOversize
			if size < int(want) {
				reason = pack.ReasonTruncated
			}
			in.fail(in.n.refuse(in.peer, in.pack, reason, nil, "chunk %s is %d bytes on the wire, the manifest says %d", id.Short(), size, want))
			rs.CancelRead(quic.StreamErrorCode(wire.CodeForReason(reason)))
			return
		}
		// The sink hashes the bytes as they arrive and refuses (with a
		// receipt naming the pack and the peer) any that are not the
		// chunk, before writing them; the file's fsync and rename follow
		// in the background, and receive waits for them before it
		// publishes.
		if err := in.sink.Put(in.ctx, id, size, r); err != nil {
			var se *store.SourceError
			if errors.As(err, &se) {
				in.streamFailed(rs, se.Err, fmt.Sprintf("reading chunk %s", id.Short()))
				return
			}
			if in.ctx.Err() != nil {
				return // already failing; this stream was cut by that
			}
			in.fail(asWire(in.peer, err))
			rs.CancelRead(quic.StreamErrorCode(wire.CodeOf(asWire(in.peer, err))))
			return
		}
		in.watch.progress()
		in.mu.Lock()
		in.state[id] = 2
		in.remaining--
		in.bytes += int64(size)
		done := in.remaining == 0
		in.mu.Unlock()
		if in.n.cfg.OnChunk != nil {
			in.n.cfg.OnChunk(in.peer, id, size)
		}
		if done {
			close(in.all)
		}
	}
}

// streamFailed ends the transfer after a chunk stream broke: the peer
// reset it (its own failure travels on the control stream), the
// connection went away, or the frames were malformed.
func (in *inbound) streamFailed(rs *quic.ReceiveStream, err error, what string) {
	if in.ctx.Err() != nil {
		return // already failing; this stream was cut by that
	}
	var fe *wire.FrameError
	if errors.As(err, &fe) || errors.Is(err, wire.ErrUnexpected) {
		in.fail(in.n.refuse(in.peer, in.pack, pack.ReasonMalformed, nil, "%s: %v", what, err))
		rs.CancelRead(quic.StreamErrorCode(wire.CodeMalformed))
		return
	}
	in.fail(&interruption{fmt.Errorf("%s: %w", what, err)})
}

// awaitStreams waits until every chunk stream of the transfer has ended,
// or the transfer failed.
func (in *inbound) awaitStreams() {
	ended := make(chan struct{})
	go func() {
		in.wg.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-in.ctx.Done():
	}
}

// progress returns the stored chunk count and bytes.
func (in *inbound) progress() (int, int64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.sizes) - in.remaining, in.bytes
}

// receive runs the receiver's side of a transfer whose offer arrived on
// ctrl (docs/replication.md, "What is verified where"). expect is the
// identity the pack must have (nil: any of the current format); check, if
// not nil, applies the request's own rules to the admitted manifest.
func (n *Node) receive(ctx context.Context, s *session, ctrl *quic.Stream, offer *wire.Offer,
	expect *pack.Identity, check func(m *pack.Manifest, id pack.Digest) *wire.Error) (Result, error) {
	start := time.Now()
	before := s.conn.Stats().BytesReceived
	pid := pack.PackID(offer.Manifest)
	res := Result{Pack: pid, Peer: s.peer}
	fail := func(werr *wire.Error) (Result, error) {
		_ = wire.Write(ctrl, refuseFrame(werr))
		ctrl.Close()
		return res, werr
	}

	// 1. The seal's producer is the peer we authenticated.
	if offer.Seal.Producer != s.peer {
		return fail(n.refuse(s.peer, pid, pack.ReasonBadSeal, nil,
			"offer sealed by producer %q arrived from peer %q", offer.Seal.Producer, s.peer))
	}
	// 2–5, 7. Decode, seal, replay ledger, identity, block size, root.
	m, missing, err := n.cfg.Store.Admit(ctx, store.Offer{Manifest: offer.Manifest, Seal: offer.Seal}, store.AdmitOptions{
		Key:    LinkKey(n.secret, s.peer, n.name),
		Expect: expect,
		Source: source(s.peer),
	})
	if err != nil {
		return fail(asWire(s.peer, err))
	}
	// 6. The request's own rules.
	if check != nil {
		if werr := check(m, pid); werr != nil {
			return fail(werr)
		}
	}
	sizes := make(map[pack.Digest]uint32, len(missing))
	distinct := map[pack.Digest]bool{}
	for _, c := range m.Chunks {
		if !distinct[c.ID] {
			distinct[c.ID] = true
			res.Chunks++
			res.Bytes += int64(c.Size)
		}
	}
	size := make(map[pack.Digest]uint32, len(m.Chunks))
	for _, c := range m.Chunks {
		size[c.ID] = c.Size
	}
	for _, id := range missing {
		sizes[id] = size[id]
	}
	res.Tokens = len(m.Tokens)
	if n.cfg.OnPlan != nil {
		var moving int64
		for _, sz := range sizes {
			moving += int64(sz)
		}
		n.cfg.OnPlan(s.peer, pid, len(sizes), moving)
	}

	ictx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	in := &inbound{n: n, peer: s.peer, pack: pid, ctx: ictx, cancel: cancel,
		sizes: sizes, state: map[pack.Digest]uint8{}, remaining: len(sizes), all: make(chan struct{}),
		watch: newStallWatch(n.cfg.StallTimeout)}
	if len(sizes) == 0 {
		close(in.all)
	} else {
		sink, err := n.cfg.Store.NewChunkSink(pid, source(s.peer), store.ChunkSinkOptions{})
		if err != nil {
			return fail(asWire(s.peer, err))
		}
		in.sink = sink
	}
	// closeSink waits until every chunk written is durable and renamed
	// (on failure too: verified chunks stay for a retry).
	var (
		sinkClosed bool
		sinkErr    error
	)
	closeSink := func() error {
		if in.sink != nil && !sinkClosed {
			sinkClosed, sinkErr = true, in.sink.Close()
		}
		return sinkErr
	}
	// However receive ends, no chunk stream outlives it, and every chunk
	// written is durable before it returns.
	defer func() {
		cancel(nil)
		in.mu.Lock()
		for _, rs := range in.streams {
			rs.CancelRead(quic.StreamErrorCode(wire.CodeCanceled))
		}
		in.mu.Unlock()
		in.wg.Wait()
		_ = closeSink()
	}()
	tid, err := s.register(in)
	if err != nil {
		return fail(asWire(s.peer, err))
	}
	defer s.unregister(tid)
	if err := wire.Write(ctrl, &wire.Need{Transfer: tid, Chunks: missing}); err != nil {
		return res, s.conn.Err(err)
	}

	// Watch the control stream: the sender may abort with a refusal, or
	// vanish.
	watch := make(chan struct{})
	var finishing atomic.Bool
	go func() {
		defer close(watch)
		msg, err := wire.Read(ctrl, wire.TypeRefuse)
		switch {
		case finishing.Load():
		case err == nil:
			if r, ok := msg.(*wire.Refuse); ok {
				in.fail(remote(s.peer, r))
			}
		default:
			var fe *wire.FrameError
			if errors.As(err, &fe) || errors.Is(err, wire.ErrUnexpected) {
				in.fail(n.refuse(s.peer, pid, pack.ReasonMalformed, nil, "control stream: %v", err))
				return
			}
			in.fail(&interruption{fmt.Errorf("sender's control stream ended: %w", s.conn.Err(err))})
		}
	}()
	stopWatch := func() {
		finishing.Store(true)
		ctrl.CancelRead(quic.StreamErrorCode(wire.CodeOK))
		<-watch
	}

	// A sender that stops sending (or never opens its chunk streams) ends
	// the transfer after the stall timeout, as an interruption.
	stopStall := in.watch.start(func(idle time.Duration) {
		in.fail(&interruption{fmt.Errorf("%w: no chunk bytes from %s for %v", ErrStalled, s.peer, idle)})
	})
	select {
	case <-in.all:
		// Every needed chunk is stored; the chunk streams end after
		// their last one, and a frame sent after it (a chunk twice, one
		// not asked for) still fails the transfer: publish only once
		// they ended clean.
		in.awaitStreams()
	case <-ictx.Done():
	}
	stopStall()
	if cause := context.Cause(ictx); cause != nil {
		stopWatch()
		cause = context.Cause(ictx)
		in.mu.Lock()
		for _, rs := range in.streams {
			rs.CancelRead(quic.StreamErrorCode(wire.CodeCanceled))
		}
		in.mu.Unlock()
		in.wg.Wait()
		_ = closeSink()
		got, gotBytes := in.progress()
		res.Moved, res.MovedBytes = got, gotBytes
		var (
			werr *wire.Error
			intr *interruption
		)
		if errors.As(cause, &werr) && !werr.Remote && !errors.As(cause, &intr) {
			return fail(werr) // this node refused; the receipt is recorded
		}
		// The sender aborted, went away, or this node stopped: the chunks
		// that arrived stay on disk, invisible, for a retry.
		rec := n.refuse(s.peer, pid, pack.ReasonTruncated, nil,
			"transfer of pack %s interrupted after %d of %d needed chunks (%v); the chunks received are kept for a retry",
			pid.Short(), got, len(sizes), cause)
		if werr != nil {
			ctrl.Close()
			return res, werr
		}
		return fail(rec)
	}
	in.wg.Wait()
	res.Moved, res.MovedBytes = in.progress()
	if err := closeSink(); err != nil {
		stopWatch()
		return fail(asWire(s.peer, err))
	}

	id, isNew, err := n.cfg.Store.PublishPack(ctx, m, store.PublishOptions{Seal: &offer.Seal, Source: source(s.peer)})
	if err != nil {
		stopWatch()
		return fail(asWire(s.peer, err))
	}
	res.New = isNew
	if id != pid {
		n.log.Warn("published pack ID differs from the offered one", "peer", s.peer, "offered", pid, "published", id)
	}
	if err := wire.Write(ctrl, &wire.Done{Pack: id, Chunks: uint32(res.Moved), Bytes: uint64(res.MovedBytes)}); err != nil {
		stopWatch()
		return res, s.conn.Err(err)
	}
	ctrl.Close()
	// Wait for the sender to read done and close its side, so that done
	// is delivered before this side may close the connection.
	finishing.Store(true)
	select {
	case <-watch:
	case <-ctx.Done():
		stopWatch()
	}
	res.WireBytes = s.conn.Stats().BytesReceived - before
	res.Duration = time.Since(start)
	return res, nil
}
