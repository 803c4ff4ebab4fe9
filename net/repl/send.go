package repl

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/quic-go/quic-go"
)

// send runs the sender's side of a transfer of pack id to the peer of s on
// the control stream ctrl.
func (n *Node) send(ctx context.Context, s *session, ctrl *quic.Stream, id pack.Digest) (Result, error) {
	res := Result{Pack: id, Peer: s.peer, New: true}
	fail := func(werr *wire.Error) (Result, error) {
		_ = wire.Write(ctrl, refuseFrame(werr))
		ctrl.Close()
		return res, werr
	}
	// The reader checks the manifest once (rule R1) and leases the pack's
	// chunks until the transfer ends, so gc deletes none of them meanwhile.
	pr, err := n.cfg.Store.OpenPack(id, "")
	if err != nil {
		return fail(asWire(s.peer, err))
	}
	defer pr.Close()
	m := pr.Manifest()
	mb, err := m.Marshal()
	if err != nil {
		return fail(asWire(s.peer, err))
	}
	if got := pack.PackID(mb); got != id {
		return fail(&wire.Error{Code: wire.CodeInternal, Peer: s.peer,
			Detail: fmt.Sprintf("local manifest of pack %s re-encodes to pack ID %s", id.Short(), got.Short())})
	}
	res.Tokens = len(m.Tokens)
	sizes := map[pack.Digest]uint32{}
	for _, c := range m.Chunks {
		if _, ok := sizes[c.ID]; !ok {
			sizes[c.ID] = c.Size
			res.Chunks++
			res.Bytes += int64(c.Size)
		}
	}

	// One transfer at a time to this peer, sealed inside the lock, so the
	// receiver publishes in generation order.
	lock := n.lockFor(n.sendLock, s.peer)
	lock.Lock()
	defer lock.Unlock()
	start := time.Now()
	before := s.conn.Stats()

	gen, err := n.gens.Next()
	if err != nil {
		return fail(asWire(s.peer, err))
	}
	var nonce [pack.NonceSize]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return fail(asWire(s.peer, err))
	}
	seal, err := pack.NewSeal(LinkKey(n.secret, n.name, s.peer), id, n.name, gen, nonce)
	if err != nil {
		return fail(asWire(s.peer, err))
	}
	if n.cfg.sealed != nil {
		n.cfg.sealed(seal)
	}
	if err := wire.Write(ctrl, &wire.Offer{Manifest: mb, Seal: seal}); err != nil {
		return res, s.conn.Err(err)
	}
	// From the offer on, the transfer must keep moving: a receiver that
	// stops reading (or answering) ends it after the stall timeout.
	watch := newStallWatch(n.cfg.StallTimeout)
	tctx, tcancel := context.WithCancelCause(ctx)
	defer tcancel(nil)
	stopStall := watch.start(func(idle time.Duration) {
		tcancel(fmt.Errorf("%w: pack %s to %s made no progress for %v", ErrStalled, id.Short(), s.peer, idle))
		ctrl.CancelRead(quic.StreamErrorCode(wire.CodeCanceled))
	})
	defer stopStall()
	stalled := func() (Result, error) {
		cause := context.Cause(tctx)
		_ = wire.Write(ctrl, &wire.Refuse{Code: wire.CodeCanceled, Detail: cause.Error()})
		ctrl.Close()
		return res, cause
	}
	msg, err := wire.Read(ctrl, wire.TypeNeed)
	if err != nil {
		if isStalled(tctx) {
			return stalled()
		}
		return res, readError(s, err)
	}
	watch.progress()
	var need *wire.Need
	switch v := msg.(type) {
	case *wire.Refuse:
		ctrl.Close()
		return res, remote(s.peer, v)
	case *wire.Need:
		need = v
	}
	seen := map[pack.Digest]bool{}
	for _, c := range need.Chunks {
		sz, ok := sizes[c]
		if !ok || seen[c] {
			return fail(&wire.Error{Code: wire.CodeProtocol, Peer: s.peer,
				Detail: fmt.Sprintf("need lists chunk %s, which pack %s does not hold once", c.Short(), id.Short())})
		}
		seen[c] = true
		res.Moved++
		res.MovedBytes += int64(sz)
	}
	if n.cfg.OnPlan != nil {
		n.cfg.OnPlan(s.peer, id, len(need.Chunks), res.MovedBytes)
	}
	if len(need.Chunks) > 0 {
		if err := n.streamChunks(tctx, s, need.Transfer, pr, seen, watch); err != nil {
			if isStalled(tctx) {
				return stalled()
			}
			werr := asWire(s.peer, err)
			if werr.Remote || isStreamReset(err) {
				// The receiver stopped us; its reason is on the control
				// stream.
				if msg, rerr := wire.Read(ctrl, wire.TypeDone); rerr == nil {
					if r, ok := msg.(*wire.Refuse); ok {
						ctrl.Close()
						return res, remote(s.peer, r)
					}
				}
				ctrl.Close()
				return res, werr
			}
			return fail(werr)
		}
	}
	msg, err = wire.Read(ctrl, wire.TypeDone)
	if err != nil {
		if isStalled(tctx) {
			return stalled()
		}
		return res, readError(s, err)
	}
	ctrl.Close()
	switch v := msg.(type) {
	case *wire.Refuse:
		return res, remote(s.peer, v)
	case *wire.Done:
		if v.Pack != id {
			return res, &wire.Error{Code: wire.CodeProtocol, Peer: s.peer,
				Detail: fmt.Sprintf("receiver reports pack %s done, sent %s", v.Pack.Short(), id.Short())}
		}
	}
	after := s.conn.Stats()
	res.WireBytes = after.BytesSent - before.BytesSent
	if after.BytesLost > before.BytesLost {
		res.LostBytes = after.BytesLost - before.BytesLost
	}
	res.Duration = time.Since(start)
	return res, nil
}

// isStalled reports whether ctx ended because its transfer stalled.
func isStalled(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrStalled) }

// readError describes a failed read of the control stream.
func readError(s *session, err error) error {
	var fe *wire.FrameError
	if errors.As(err, &fe) || errors.Is(err, wire.ErrUnexpected) {
		return &wire.Error{Code: wire.CodeMalformed, Peer: s.peer, Detail: err.Error()}
	}
	return s.conn.Err(err)
}

func isStreamReset(err error) bool {
	var se *quic.StreamError
	return errors.As(err, &se) && se.Remote
}

// streamChunks sends the needed chunks of the pack pr reads on parallel
// chunk streams. Each stream has its own goroutine, which reads the next
// needed block through pr (verified against its chunk ID, rule R2, so no
// byte leaves that does not match its ID and the pack's root) straight
// into the buffer it then writes: while one stream's chunk is on the
// wire, another's is read and hashed. Only needed chunks are read, each
// once; memory is one chunk per stream.
func (n *Node) streamChunks(ctx context.Context, s *session, transfer uint64, pr *store.PackReader, need map[pack.Digest]bool, watch *stallWatch) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	m := pr.Manifest()
	var blocks []int // the first block naming each needed chunk, in order
	queued := make(map[pack.Digest]bool, len(need))
	for i, c := range m.Chunks {
		if need[c.ID] && !queued[c.ID] {
			queued[c.ID] = true
			blocks = append(blocks, i)
		}
	}
	streams := min(n.cfg.Streams, len(blocks))
	var (
		next atomic.Int64 // index into blocks of the next block to send
		sent atomic.Int64
		wg   sync.WaitGroup
	)
	sendStreams := make([]*quic.SendStream, 0, streams)
	for range streams {
		st, err := s.conn.OpenUniStream(ctx)
		if err != nil {
			cancel(err)
			break
		}
		if err := wire.Write(st, &wire.Chunks{Transfer: transfer}); err != nil {
			st.CancelWrite(quic.StreamErrorCode(wire.CodeInternal))
			cancel(s.conn.Err(err))
			break
		}
		sendStreams = append(sendStreams, st)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A write waits for the receiver's flow-control credit, which
			// a stalled receiver never gives: when the transfer ends
			// early, reset the stream so that the write returns.
			defer context.AfterFunc(ctx, func() {
				st.CancelWrite(quic.StreamErrorCode(wire.CodeOf(asWire(s.peer, context.Cause(ctx)))))
			})()
			var buf []byte
			hdr := make([]byte, 0, wire.ChunkHeaderSize)
			for ctx.Err() == nil {
				k := next.Add(1) - 1
				if k >= int64(len(blocks)) {
					return
				}
				b := blocks[k]
				cid := m.Chunks[b].ID
				data, err := pr.ReadBlock(ctx, b, buf)
				if err != nil {
					if ctx.Err() == nil {
						// The local store could not prove its own pack
						// (it quarantined it): fail closed, and tell the
						// receiver.
						cancel(&wire.Error{Code: wire.CodeInternal, Peer: s.peer,
							Detail: fmt.Sprintf("the sender cannot prove pack %s: %v", pr.ID().Short(), err)})
					}
					return
				}
				buf = data[:cap(data)]
				if n.cfg.corrupt != nil {
					n.cfg.corrupt(cid, data)
				}
				hdr, err = wire.AppendChunkHeader(hdr[:0], cid, len(data))
				if err == nil {
					_, err = st.Write(hdr)
				}
				if err == nil {
					err = writeWatched(st, data, watch)
				}
				if err != nil {
					cancel(s.conn.Err(err))
					return
				}
				sent.Add(1)
				if n.cfg.OnSent != nil {
					n.cfg.OnSent(s.peer, cid, len(data))
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		code := wire.CodeOf(asWire(s.peer, err))
		for _, st := range sendStreams {
			st.CancelWrite(quic.StreamErrorCode(code))
		}
		return err
	}
	if got := int(sent.Load()); got != len(need) {
		for _, st := range sendStreams {
			st.CancelWrite(quic.StreamErrorCode(wire.CodeInternal))
		}
		return &wire.Error{Code: wire.CodeInternal, Peer: s.peer,
			Detail: fmt.Sprintf("sent %d of the %d needed chunks of pack %s", got, len(need), pr.ID().Short())}
	}
	for _, st := range sendStreams {
		if err := st.Close(); err != nil {
			// The receiver stopped the stream (STOP_SENDING) after its
			// last chunk was buffered: Close reports only that it was
			// cancelled; the peer's code is the stream's cause, and its
			// reason is on the control stream (send reads it).
			if cause := context.Cause(st.Context()); isStreamReset(cause) {
				return cause
			}
			return s.conn.Err(err)
		}
	}
	return nil
}

// watchedPiece is the most bytes a chunk stream writes between two
// records of progress.
const watchedPiece = 128 << 10

// writeWatched writes data to st in pieces, recording progress after each
// piece the transport took (a write waits for the receiver's credit).
func writeWatched(st *quic.SendStream, data []byte, watch *stallWatch) error {
	for len(data) > 0 {
		k := min(len(data), watchedPiece)
		if _, err := st.Write(data[:k]); err != nil {
			return err
		}
		watch.progress()
		data = data[k:]
	}
	return nil
}
