package repl

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"

	"github.com/muserhq/muser/net/transport"
	"github.com/muserhq/muser/net/wire"
	"github.com/quic-go/quic-go"
)

// session is one connection to a peer: it routes the peer's chunk streams
// to the transfers this node receives on it, and serves the control
// streams the peer opens.
type session struct {
	n    *Node
	conn *transport.Conn
	peer string

	mu       sync.Mutex
	incoming map[uint64]*inbound
}

// startSession adopts a connection and starts its stream loops.
func (n *Node) startSession(c *transport.Conn) (*session, error) {
	s := &session{n: n, conn: c, peer: c.Peer(), incoming: map[uint64]*inbound{}}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, ErrClosed
	}
	n.sessions[s] = struct{}{}
	n.wg.Add(3)
	n.mu.Unlock()
	ctx, cancel := mergeCancel(c.Context(), n.ctx)
	go func() {
		defer n.wg.Done()
		<-ctx.Done()
		cancel()
		if n.ctx.Err() != nil {
			c.Close(wire.CodeUnavailable, "node closing")
		}
		n.mu.Lock()
		delete(n.sessions, s)
		if n.outbound[s.peer] == s {
			delete(n.outbound, s.peer)
		}
		n.mu.Unlock()
	}()
	go func() {
		defer n.wg.Done()
		s.acceptChunkStreams(ctx)
	}()
	go func() {
		defer n.wg.Done()
		s.acceptControlStreams(ctx)
	}()
	return s, nil
}

func (s *session) acceptControlStreams(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		st, err := s.conn.AcceptStream(ctx)
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.n.serveControl(ctx, s, st)
		}()
	}
}

func (s *session) acceptChunkStreams(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		rs, err := s.conn.AcceptUniStream(ctx)
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.routeChunkStream(rs)
		}()
	}
}

// routeChunkStream reads a chunk stream's opening frame and hands it to
// its transfer.
func (s *session) routeChunkStream(rs *quic.ReceiveStream) {
	m, err := wire.Read(rs, wire.TypeChunks)
	if err != nil {
		rs.CancelRead(quic.StreamErrorCode(wire.CodeOf(s.conn.Err(err))))
		return
	}
	ch, ok := m.(*wire.Chunks)
	if !ok {
		rs.CancelRead(quic.StreamErrorCode(wire.CodeProtocol))
		return
	}
	s.mu.Lock()
	in := s.incoming[ch.Transfer]
	s.mu.Unlock()
	if in == nil {
		s.n.log.Warn("chunk stream for an unknown transfer", "peer", s.peer, "transfer", ch.Transfer)
		rs.CancelRead(quic.StreamErrorCode(wire.CodeProtocol))
		return
	}
	in.serveStream(rs)
}

// register adds a receiving transfer and returns its ID.
func (s *session) register(in *inbound) (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		id := binary.LittleEndian.Uint64(b[:])
		s.mu.Lock()
		if _, dup := s.incoming[id]; !dup && id != 0 {
			s.incoming[id] = in
			s.mu.Unlock()
			return id, nil
		}
		s.mu.Unlock()
	}
}

func (s *session) unregister(id uint64) {
	s.mu.Lock()
	delete(s.incoming, id)
	s.mu.Unlock()
}
