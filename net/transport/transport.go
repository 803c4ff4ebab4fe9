package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/muserhq/muser/net/mtls"
	"github.com/muserhq/muser/net/wire"
	"github.com/quic-go/quic-go"
)

// DefaultRevalidateEvery is how often an endpoint re-authorizes its live
// connections when Config.RevalidateEvery is zero.
const DefaultRevalidateEvery = 2 * time.Second

// Config configures an Endpoint.
type Config struct {
	// TLS holds this node's credential, the cluster CA and the Authorizer.
	TLS *mtls.Config
	// QUIC tunes quic-go; nil means DefaultQUIC().
	QUIC *quic.Config
	// Logger receives handshake refusals and revocations; nil discards.
	Logger *slog.Logger
	// RevalidateEvery is how often live connections are re-authorized;
	// zero means DefaultRevalidateEvery, negative disables the loop
	// (Revalidate can still be called).
	RevalidateEvery time.Duration
	// Refused, if not nil, is called for every inbound handshake refused
	// by this node, with the name the peer's certificate claims ("" when
	// it has none).
	Refused func(claimed string, err error)
}

// DefaultQUIC returns the quic-go configuration muser uses: windows large
// enough to keep a loopback or LAN link busy with a few parallel streams,
// room for many chunk streams, keep-alives so idle replication links
// survive NAT timeouts.
func DefaultQUIC() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           5 * time.Second,
		MaxIdleTimeout:                 30 * time.Second,
		KeepAlivePeriod:                10 * time.Second,
		InitialStreamReceiveWindow:     4 << 20,
		MaxStreamReceiveWindow:         16 << 20,
		InitialConnectionReceiveWindow: 16 << 20,
		MaxConnectionReceiveWindow:     64 << 20,
		MaxIncomingStreams:             256,
		MaxIncomingUniStreams:          256,
	}
}

// Endpoint is a UDP socket speaking QUIC with the cluster's mTLS.
type Endpoint struct {
	cfg    Config
	log    *slog.Logger
	udp    *net.UDPConn
	tr     *quic.Transport
	ln     *quic.Listener
	server *tls.Config

	mu     sync.Mutex
	conns  map[*Conn]struct{}
	closed bool

	// The accept loop (started by the first Accept, under mu) hands on
	// each connection once its own goroutine has welcomed it, so that a
	// peer slow to take the welcome holds up no other.
	accepting bool
	welcomed  chan *Conn
	acceptEnd chan struct{} // closed when the listener stops accepting
	acceptErr error         // why, once acceptEnd is closed

	stop chan struct{}
	wg   sync.WaitGroup
}

// Listen opens an endpoint on the UDP address addr ("host:port"; port 0
// picks one) that accepts connections and can dial.
func Listen(addr string, cfg Config) (*Endpoint, error) {
	return open(addr, cfg, true)
}

// NewDialer opens an endpoint on an ephemeral UDP port that only dials.
func NewDialer(cfg Config) (*Endpoint, error) {
	return open(":0", cfg, false)
}

func open(addr string, cfg Config, listen bool) (*Endpoint, error) {
	if cfg.TLS == nil {
		return nil, errors.New("transport: no TLS configuration")
	}
	if cfg.QUIC == nil {
		cfg.QUIC = DefaultQUIC()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: address %q: %w", addr, err)
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", addr, err)
	}
	e := &Endpoint{
		cfg:       cfg,
		log:       log,
		udp:       udp,
		tr:        &quic.Transport{Conn: udp},
		conns:     make(map[*Conn]struct{}),
		stop:      make(chan struct{}),
		welcomed:  make(chan *Conn),
		acceptEnd: make(chan struct{}),
	}
	if listen {
		tlsCfg := *cfg.TLS
		tlsCfg.Refused = e.refused
		sc, err := tlsCfg.Server()
		if err != nil {
			udp.Close()
			return nil, err
		}
		e.server = sc
		ln, err := e.tr.Listen(sc, cfg.QUIC)
		if err != nil {
			udp.Close()
			return nil, fmt.Errorf("transport: listen: %w", err)
		}
		e.ln = ln
	}
	if every := cfg.RevalidateEvery; every >= 0 {
		if every == 0 {
			every = DefaultRevalidateEvery
		}
		e.wg.Add(1)
		go e.revalidateLoop(every)
	}
	return e, nil
}

func (e *Endpoint) refused(claimed string, err error) {
	e.log.Warn("replication handshake refused", "peer", claimed, "err", err)
	if e.cfg.Refused != nil {
		e.cfg.Refused(claimed, err)
	}
}

// Addr returns the endpoint's local UDP address.
func (e *Endpoint) Addr() net.Addr { return e.udp.LocalAddr() }

// Name returns this node's name.
func (e *Endpoint) Name() string { return e.cfg.TLS.Credential.Name }

// Accept waits for the next inbound connection whose handshake completed
// and that took its welcome (refused handshakes never surface here). It
// fails on an endpoint made by NewDialer, and once the endpoint is closed
// with the listener's error.
func (e *Endpoint) Accept(ctx context.Context) (*Conn, error) {
	if e.ln == nil {
		return nil, errors.New("transport: endpoint does not listen")
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, net.ErrClosed
	}
	if !e.accepting {
		e.accepting = true
		e.wg.Add(1) // under mu: before Close's Wait
		go e.acceptLoop()
	}
	e.mu.Unlock()
	select {
	case c := <-e.welcomed:
		return c, nil
	case <-e.acceptEnd:
		return nil, e.acceptErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// acceptLoop takes each new connection from the listener and welcomes it
// in a goroutine of its own, until the listener is closed.
func (e *Endpoint) acceptLoop() {
	defer e.wg.Done()
	for {
		qc, err := e.ln.Accept(context.Background())
		if err != nil {
			e.acceptErr = err
			close(e.acceptEnd)
			return
		}
		e.wg.Add(1)
		go e.welcome(qc)
	}
}

// welcome admits qc and sends its welcome within the handshake's time
// bound, then hands it to Accept; a peer that does not take the welcome
// in time (no stream credit) is dropped.
func (e *Endpoint) welcome(qc *quic.Conn) {
	defer e.wg.Done()
	c, err := e.adopt(qc)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), e.welcomeTime())
		err = sendWelcome(ctx, qc)
		cancel()
	}
	if err != nil {
		qc.CloseWithError(quic.ApplicationErrorCode(wire.CodeUnauthorized), truncateReason(err.Error()))
		e.log.Warn("replication connection dropped", "remote", qc.RemoteAddr(), "err", err)
		return
	}
	select {
	case e.welcomed <- c:
	case <-e.stop:
		qc.CloseWithError(quic.ApplicationErrorCode(wire.CodeUnavailable), "endpoint closing")
	}
}

// welcomeTime bounds the welcome: the handshake's idle timeout.
func (e *Endpoint) welcomeTime() time.Duration {
	if d := e.cfg.QUIC.HandshakeIdleTimeout; d > 0 {
		return d
	}
	return 5 * time.Second
}

// welcome is the single byte an accepting endpoint sends on its first
// unidirectional stream once it has verified and admitted the dialer. In
// TLS 1.3 the client finishes its handshake before the server has checked
// the client's certificate, so without it a refused dialer would learn of
// the refusal only at its first stream operation; Dial waits for it.
const welcome = 'M'

func sendWelcome(ctx context.Context, qc *quic.Conn) error {
	s, err := qc.OpenUniStreamSync(ctx)
	if err != nil {
		return err
	}
	if _, err := s.Write([]byte{welcome}); err != nil {
		return err
	}
	return s.Close()
}

func awaitWelcome(ctx context.Context, qc *quic.Conn) error {
	s, err := qc.AcceptUniStream(ctx)
	if err != nil {
		return err
	}
	var b [2]byte
	n, err := io.ReadFull(s, b[:1])
	if err != nil {
		return err
	}
	if n != 1 || b[0] != welcome {
		return fmt.Errorf("transport: peer sent %q where the welcome byte %q belongs", b[:n], welcome)
	}
	if n, err := s.Read(b[1:]); n != 0 || err != io.EOF {
		return fmt.Errorf("transport: peer's welcome stream carries more than the welcome byte")
	}
	return nil
}

// Dial connects to the node called peer at addr. The server's certificate
// must chain to the cluster CA and name peer, and the Authorizer must
// admit peer. A handshake refused by either side is a *wire.Error with
// CodeUnauthorized.
func (e *Endpoint) Dial(ctx context.Context, peer, addr string) (*Conn, error) {
	cc, err := e.cfg.TLS.Client(peer)
	if err != nil {
		return nil, err
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: address %q of %s: %w", addr, peer, err)
	}
	qc, err := e.tr.Dial(ctx, ua, cc, e.cfg.QUIC)
	if err != nil {
		return nil, dialError(peer, addr, err)
	}
	if err := awaitWelcome(ctx, qc); err != nil {
		qc.CloseWithError(quic.ApplicationErrorCode(wire.CodeProtocol), "no welcome")
		return nil, dialError(peer, addr, err)
	}
	c, err := e.adopt(qc)
	if err != nil {
		qc.CloseWithError(quic.ApplicationErrorCode(wire.CodeUnauthorized), err.Error())
		return nil, err
	}
	return c, nil
}

// dialError turns a failed handshake into a wire.Error naming the peer.
func dialError(peer, addr string, err error) error {
	var (
		te *quic.TransportError
		pe *mtls.PeerError
		ae *quic.ApplicationError
	)
	switch {
	case errors.As(err, &ae):
		return &wire.Error{Code: wire.Code(ae.ErrorCode), Remote: ae.Remote, Peer: peer,
			Detail: fmt.Sprintf("connection to %s at %s closed during admission: %s", peer, addr, ae.ErrorMessage)}
	case errors.As(err, &pe):
		return &wire.Error{Code: wire.CodeUnauthorized, Peer: peer, Detail: fmt.Sprintf("refused %s at %s: %v", peer, addr, pe)}
	case errors.As(err, &te) && te.ErrorCode.IsCryptoError():
		if te.Remote {
			return &wire.Error{Code: wire.CodeUnauthorized, Remote: true, Peer: peer,
				Detail: fmt.Sprintf("%s at %s refused the handshake (%v): this node may not be enrolled there, or was removed", peer, addr, te)}
		}
		return &wire.Error{Code: wire.CodeUnauthorized, Peer: peer, Detail: fmt.Sprintf("handshake with %s at %s failed: %v", peer, addr, te)}
	}
	return fmt.Errorf("transport: dial %s at %s: %w", peer, addr, err)
}

// adopt wraps a connection whose handshake completed, reading its peer's
// verified name, and registers it for revalidation.
func (e *Endpoint) adopt(qc *quic.Conn) (*Conn, error) {
	name, cert, err := mtls.PeerFromState(qc.ConnectionState().TLS)
	if err != nil {
		return nil, err
	}
	c := &Conn{q: qc, peer: name, cert: cert, ep: e}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		qc.CloseWithError(quic.ApplicationErrorCode(wire.CodeUnavailable), "endpoint closed")
		return nil, net.ErrClosed
	}
	e.conns[c] = struct{}{}
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		<-qc.Context().Done()
		e.mu.Lock()
		delete(e.conns, c)
		e.mu.Unlock()
	}()
	return c, nil
}

// Revalidate asks the Authorizer again about the peer of every live
// connection and closes, with wire.CodeRevoked, those it no longer admits.
// It returns the names of the peers it disconnected.
func (e *Endpoint) Revalidate() []string {
	auth := e.cfg.TLS.Authorizer
	if auth == nil {
		return nil
	}
	e.mu.Lock()
	conns := make([]*Conn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
	}
	e.mu.Unlock()
	var dropped []string
	for _, c := range conns {
		if err := auth.Authorize(c.peer, c.cert); err != nil {
			e.log.Warn("replication peer revoked; closing its connection", "peer", c.peer, "err", err)
			c.q.CloseWithError(quic.ApplicationErrorCode(wire.CodeRevoked), truncateReason(err.Error()))
			dropped = append(dropped, c.peer)
		}
	}
	return dropped
}

func (e *Endpoint) revalidateLoop(every time.Duration) {
	defer e.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			e.Revalidate()
		}
	}
}

// Conns returns the number of live connections.
func (e *Endpoint) Conns() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.conns)
}

// Close closes every connection (with wire.CodeUnavailable), the listener
// and the socket, and waits for the endpoint's goroutines.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	conns := make([]*Conn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
	}
	e.mu.Unlock()
	close(e.stop)
	for _, c := range conns {
		c.q.CloseWithError(quic.ApplicationErrorCode(wire.CodeUnavailable), "endpoint closing")
	}
	var errs []error
	if e.ln != nil {
		errs = append(errs, e.ln.Close())
	}
	errs = append(errs, e.tr.Close())
	errs = append(errs, e.udp.Close())
	e.wg.Wait()
	return errors.Join(filterClosed(errs)...)
}

func filterClosed(errs []error) []error {
	out := errs[:0]
	for _, err := range errs {
		if err != nil && !errors.Is(err, net.ErrClosed) {
			out = append(out, err)
		}
	}
	return out
}

// maxReason bounds the reason text sent in a QUIC close frame.
const maxReason = 512

func truncateReason(s string) string {
	if len(s) > maxReason {
		return s[:maxReason]
	}
	return s
}

// Conn is a QUIC connection to a verified peer.
type Conn struct {
	q    *quic.Conn
	peer string
	cert *x509.Certificate
	ep   *Endpoint
}

// Peer returns the peer's node name, as its verified certificate says.
func (c *Conn) Peer() string { return c.peer }

// Context is done when the connection closes.
func (c *Conn) Context() context.Context { return c.q.Context() }

// RemoteAddr returns the peer's UDP address.
func (c *Conn) RemoteAddr() net.Addr { return c.q.RemoteAddr() }

// Stats returns quic-go's counters for the connection: bytes and packets
// sent and received on the wire, losses, RTT.
func (c *Conn) Stats() quic.ConnectionStats { return c.q.ConnectionStats() }

// OpenStream opens a bidirectional stream, waiting for stream credit.
func (c *Conn) OpenStream(ctx context.Context) (*quic.Stream, error) {
	s, err := c.q.OpenStreamSync(ctx)
	return s, c.Err(err)
}

// AcceptStream waits for the peer to open a bidirectional stream.
func (c *Conn) AcceptStream(ctx context.Context) (*quic.Stream, error) {
	s, err := c.q.AcceptStream(ctx)
	return s, c.Err(err)
}

// OpenUniStream opens a unidirectional stream to the peer.
func (c *Conn) OpenUniStream(ctx context.Context) (*quic.SendStream, error) {
	s, err := c.q.OpenUniStreamSync(ctx)
	return s, c.Err(err)
}

// AcceptUniStream waits for the peer to open a unidirectional stream.
func (c *Conn) AcceptUniStream(ctx context.Context) (*quic.ReceiveStream, error) {
	s, err := c.q.AcceptUniStream(ctx)
	return s, c.Err(err)
}

// Close closes the connection with a protocol code and a reason.
func (c *Conn) Close(code wire.Code, reason string) error {
	return c.q.CloseWithError(quic.ApplicationErrorCode(code), truncateReason(reason))
}

// Err translates an error from a stream or the connection into a
// *wire.Error when it carries a protocol code (an application close or a
// stream reset), and returns other errors unchanged.
func (c *Conn) Err(err error) error {
	if err == nil {
		return nil
	}
	var (
		ae *quic.ApplicationError
		se *quic.StreamError
		ie *quic.IdleTimeoutError
	)
	switch {
	case errors.As(err, &ae):
		detail := ae.ErrorMessage
		return &wire.Error{Code: wire.Code(ae.ErrorCode), Remote: ae.Remote, Peer: c.peer, Detail: detail}
	case errors.As(err, &se):
		return &wire.Error{Code: wire.Code(se.ErrorCode), Remote: se.Remote, Peer: c.peer,
			Detail: fmt.Sprintf("stream %d reset", se.StreamID)}
	case errors.As(err, &ie):
		return fmt.Errorf("connection to %s timed out: %w", c.peer, err)
	}
	return err
}
