package repl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/quic-go/quic-go"
)

// serveControl serves one control stream a peer opened: a push offer, a
// pull or a prefill request.
func (n *Node) serveControl(ctx context.Context, s *session, st *quic.Stream) {
	// A stream that never brings its request must not hold its goroutine
	// for as long as the connection lives.
	if n.cfg.StallTimeout > 0 {
		st.SetReadDeadline(time.Now().Add(n.cfg.StallTimeout))
	}
	msg, err := wire.Read(st, wire.TypeOffer, wire.TypePull, wire.TypePrefill)
	st.SetReadDeadline(time.Time{})
	if err != nil {
		werr := asWire(s.peer, readError(s, err))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			werr = &wire.Error{Code: wire.CodeCanceled, Peer: s.peer,
				Detail: fmt.Sprintf("%v: no request on the control stream within %v", ErrStalled, n.cfg.StallTimeout)}
			n.log.Warn("replication control stream brought no request", "peer", s.peer, "waited", n.cfg.StallTimeout)
		}
		if werr.Code == wire.CodeMalformed {
			// A refusal of the peer's frames: recorded like any other.
			werr = n.refuse(s.peer, pack.Digest{}, pack.ReasonMalformed, nil, "control stream: %v", err)
		}
		_ = wire.Write(st, refuseFrame(werr))
		st.Close()
		st.CancelRead(quic.StreamErrorCode(werr.Code))
		return
	}
	var (
		res  Result
		op   string
		rerr error
	)
	switch m := msg.(type) {
	case *wire.Offer:
		op = "receive push"
		var expect *pack.Identity
		if n.cfg.Expect != nil {
			if id, derr := pack.DecodeManifest(m.Manifest); derr == nil {
				expect = n.cfg.Expect(id.Identity)
			}
		}
		res, rerr = n.receive(ctx, s, st, m, expect, nil)
	case *wire.Pull:
		op = "serve pull"
		id, err := n.cfg.Store.ResolvePack(m.Ref)
		if err != nil {
			werr := &wire.Error{Code: wire.CodeNotFound, Peer: s.peer, Detail: err.Error()}
			_ = wire.Write(st, refuseFrame(werr))
			st.Close()
			rerr = werr
			break
		}
		res, rerr = n.send(ctx, s, st, id)
	case *wire.Prefill:
		op = "serve prefill"
		res, rerr = n.produce(ctx, s, st, m)
	case *wire.Refuse:
		st.Close()
		return
	}
	if rerr != nil {
		n.log.Warn("replication "+op+" failed", "peer", s.peer, "pack", res.Pack, "err", rerr)
	} else {
		n.log.Info("replication "+op, "peer", s.peer, "pack", res.Pack, "moved", res.Moved, "chunks", res.Chunks, "bytes", res.MovedBytes)
	}
}

// produce answers a prefill request: compute (reusing the local cache),
// then send the pack as in a pull.
func (n *Node) produce(ctx context.Context, s *session, st *quic.Stream, req *wire.Prefill) (Result, error) {
	fail := func(werr *wire.Error) (Result, error) {
		_ = wire.Write(st, refuseFrame(werr))
		st.Close()
		return Result{Peer: s.peer}, werr
	}
	if n.cfg.Prefiller == nil {
		return fail(&wire.Error{Code: wire.CodeUnavailable, Peer: s.peer,
			Detail: fmt.Sprintf("%s is not a prefill producer (muser serve --role producer)", n.name)})
	}
	if b := n.cfg.Store.BlockTokens(); len(req.Tokens) < b {
		return fail(&wire.Error{Code: wire.CodePrefillFailed, Peer: s.peer,
			Detail: fmt.Sprintf("%d tokens are fewer than one %d-token block", len(req.Tokens), b)})
	}
	id, err := n.cfg.Prefiller.Prefill(ctx, req.Identity, req.Salt, req.Tokens)
	if err != nil {
		werr := asWire(s.peer, err)
		if werr.Code == wire.CodeInternal || werr.Code == wire.CodeNotFound {
			werr.Code = wire.CodePrefillFailed
		}
		return fail(werr)
	}
	return n.send(ctx, s, st, id)
}

// Push sends pack id to peer. It returns what moved; a refusal by the
// peer is a *wire.Error (Remote, with the receipt the peer recorded).
func (n *Node) Push(ctx context.Context, peer string, id pack.Digest) (Result, error) {
	s, err := n.session(ctx, peer)
	if err != nil {
		return Result{Pack: id, Peer: peer}, err
	}
	st, err := s.conn.OpenStream(ctx)
	if err != nil {
		return Result{Pack: id, Peer: peer}, err
	}
	defer cancelOnContext(ctx, st)()
	return n.send(ctx, s, st, id)
}

// Pull fetches from peer the pack whose ID starts with ref (a full hex ID
// or a prefix unique on the peer) and publishes it in the local store.
func (n *Node) Pull(ctx context.Context, peer, ref string) (Result, error) {
	ref = strings.ToLower(ref)
	if _, err := wire.Append(nil, &wire.Pull{Ref: ref}); err != nil {
		return Result{Peer: peer}, err
	}
	s, err := n.session(ctx, peer)
	if err != nil {
		return Result{Peer: peer}, err
	}
	st, err := s.conn.OpenStream(ctx)
	if err != nil {
		return Result{Peer: peer}, err
	}
	defer cancelOnContext(ctx, st)()
	if err := wire.Write(st, &wire.Pull{Ref: ref}); err != nil {
		return Result{Peer: peer}, s.conn.Err(err)
	}
	offer, err := readOffer(s, st)
	if err != nil {
		return Result{Peer: peer}, err
	}
	return n.receive(ctx, s, st, offer, nil, func(m *pack.Manifest, id pack.Digest) *wire.Error {
		if !strings.HasPrefix(id.String(), ref) {
			return n.refuse(peer, id, pack.ReasonManifestDigest, nil,
				"asked %s for pack %s, it offered pack %s", peer, ref, id)
		}
		return nil
	})
}

// Prefill asks the producer peer to prefill tokens under (id, salt) and
// installs the resulting pack, which covers the longest block-aligned
// prefix of tokens. have is how many leading tokens this node's cache
// already holds (a hint; only missing chunks move anyway). The pack must
// have exactly identity id, the tenant of salt and those tokens, or it is
// refused with a receipt.
func (n *Node) Prefill(ctx context.Context, peer string, id pack.Identity, salt []byte, tokens []int32, have int) (Result, error) {
	if have < 0 || have > len(tokens) {
		return Result{Peer: peer}, fmt.Errorf("repl: have %d outside 0..%d", have, len(tokens))
	}
	req := &wire.Prefill{Identity: id, Salt: salt, Tokens: tokens, Have: uint32(have)}
	if _, err := wire.Append(nil, req); err != nil {
		return Result{Peer: peer}, err
	}
	s, err := n.session(ctx, peer)
	if err != nil {
		return Result{Peer: peer}, err
	}
	st, err := s.conn.OpenStream(ctx)
	if err != nil {
		return Result{Peer: peer}, err
	}
	defer cancelOnContext(ctx, st)()
	if err := wire.Write(st, req); err != nil {
		return Result{Peer: peer}, s.conn.Err(err)
	}
	offer, err := readOffer(s, st)
	if err != nil {
		return Result{Peer: peer}, err
	}
	tenant := pack.TenantTag(salt)
	return n.receive(ctx, s, st, offer, &id, func(m *pack.Manifest, pid pack.Digest) *wire.Error {
		want := len(tokens) / m.BlockTokens * m.BlockTokens
		switch {
		case m.Tenant != tenant:
			return n.refuse(peer, pid, pack.ReasonUnauthorized, nil,
				"prefill answer is for tenant %s, the request's is %s", m.Tenant.Short(), tenant.Short())
		case len(m.Tokens) != want || !slices.Equal(m.Tokens, tokens[:want]):
			return n.refuse(peer, pid, pack.ReasonMalformed, nil,
				"prefill answer covers %d tokens that are not the request's first %d", len(m.Tokens), want)
		}
		return nil
	})
}

// readOffer reads the offer that answers a pull or prefill request.
func readOffer(s *session, st *quic.Stream) (*wire.Offer, error) {
	msg, err := wire.Read(st, wire.TypeOffer)
	if err != nil {
		return nil, readError(s, err)
	}
	switch v := msg.(type) {
	case *wire.Refuse:
		st.Close()
		return nil, remote(s.peer, v)
	case *wire.Offer:
		return v, nil
	}
	return nil, errors.New("unreachable")
}

// cancelOnContext resets st when ctx ends before the returned function is
// called, so a canceled operation does not wait on its peer.
func cancelOnContext(ctx context.Context, st *quic.Stream) func() {
	stop := context.AfterFunc(ctx, func() {
		st.CancelRead(quic.StreamErrorCode(wire.CodeCanceled))
		st.CancelWrite(quic.StreamErrorCode(wire.CodeCanceled))
	})
	return func() { stop() }
}
