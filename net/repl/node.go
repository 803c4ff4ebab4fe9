package repl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/net/mtls"
	"github.com/muserhq/muser/net/transport"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/quic-go/quic-go"
)

// DefaultStreams is the number of parallel chunk streams per transfer.
const DefaultStreams = 4

// MaxStreams is the most chunk streams a receiver accepts for one transfer
// (each holds up to one chunk in memory); a sender uses at most this many.
const MaxStreams = 32

// Prefiller computes KV for a producer (muser serve --role producer). The
// engine side implements it.
type Prefiller interface {
	// Prefill makes the local store hold a pack covering the longest
	// block-aligned prefix of tokens under (id, salt), computing only what
	// the store's cache lacks, and returns that pack's ID. It fails when
	// tokens are shorter than one block or the engine's identity is not id.
	Prefill(ctx context.Context, id pack.Identity, salt []byte, tokens []int32) (pack.Digest, error)
}

// Config configures a Node.
type Config struct {
	// Store is the local store packs are read from and published to.
	Store *store.Store
	// Cluster is this node's cluster directory: its credential, the link
	// secret, the registry (peer addresses and admission) and the sealing
	// generations.
	Cluster *cluster.Home
	// Streams is the number of parallel chunk streams a transfer this node
	// sends uses (DefaultStreams when zero).
	Streams int
	// Expect, if not nil, gives the identity a pushed pack must have,
	// given the identity offered; returning nil accepts any identity of the
	// current format. A pack differing from it in any field is refused with
	// a receipt naming the fields.
	Expect func(offered pack.Identity) *pack.Identity
	// Prefiller, if not nil, makes this node a prefill producer.
	Prefiller Prefiller
	// StallTimeout ends a transfer that makes no progress for this long
	// (no chunk bytes written or read, no control frame answered) with
	// ErrStalled, on either side, and bounds the wait for a control
	// stream's first frame: DefaultStallTimeout when zero; negative
	// disables it.
	StallTimeout time.Duration
	// QUIC tunes the transport (transport.DefaultQUIC when nil).
	QUIC *quic.Config
	// RevalidateEvery is passed to the transport (see transport.Config).
	RevalidateEvery time.Duration
	// Logger receives refusals, revocations and failures (nil discards).
	Logger *slog.Logger
	// Now is the clock for certificates and generations (time.Now when nil).
	Now func() time.Time
	// OnChunk, if not nil, is called after each chunk this node receives
	// is verified and written (its fsync and rename may still be under
	// way: the pack is published only once every one is done; progress
	// reporting).
	OnChunk func(peer string, id pack.Digest, size int)
	// OnPlan, if not nil, is called once per transfer when the chunks
	// that will move are known (on both sides): their count and bytes
	// (progress reporting).
	OnPlan func(peer string, id pack.Digest, chunks int, bytes int64)
	// OnSent, if not nil, is called after each chunk this node sends is
	// written (progress reporting).
	OnSent func(peer string, id pack.Digest, size int)

	// corrupt, set only by tests, alters chunk bytes after they are read
	// and verified and before they are framed, as a faulty sender would.
	corrupt func(id pack.Digest, data []byte)
	// sealed, set only by tests, observes every seal this node makes.
	sealed func(pack.Seal)
}

// Node is one side of replication: it pushes, pulls and, with Listen and
// Serve, answers its peers. Its methods are safe for concurrent use.
type Node struct {
	cfg    Config
	log    *slog.Logger
	name   string
	secret [mtls.LinkSecretLen]byte
	gens   *cluster.Generations
	tcfg   transport.Config

	mu        sync.Mutex
	ep        *transport.Endpoint // listening endpoint, or nil
	dialer    *transport.Endpoint // dial-only endpoint, when not listening
	outbound  map[string]*session // dialed sessions by peer name
	sessions  map[*session]struct{}
	sendLock  map[string]*sync.Mutex // one transfer at a time per receiver
	dialLock  map[string]*sync.Mutex // one dial at a time per peer
	refusedAt map[string]time.Time   // last handshake-refusal receipt per claimed name
	closed    bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Node over a store and a cluster directory. It loads and
// checks the node's credential and link secret.
func New(cfg Config) (*Node, error) {
	if cfg.Store == nil || cfg.Cluster == nil {
		return nil, errors.New("repl: Config needs a Store and a Cluster")
	}
	if cfg.Streams <= 0 {
		cfg.Streams = DefaultStreams
	}
	cfg.Streams = min(cfg.Streams, MaxStreams)
	if cfg.StallTimeout == 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tlsCfg, err := cfg.Cluster.TLSConfig(cfg.Now())
	if err != nil {
		return nil, err
	}
	tlsCfg.Time = cfg.Now
	secret, err := cfg.Cluster.LinkSecret()
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:       cfg,
		log:       log,
		name:      cfg.Cluster.Name(),
		secret:    secret,
		gens:      cfg.Cluster.Generations(cfg.Now),
		outbound:  map[string]*session{},
		sessions:  map[*session]struct{}{},
		sendLock:  map[string]*sync.Mutex{},
		dialLock:  map[string]*sync.Mutex{},
		refusedAt: map[string]time.Time{},
	}
	n.tcfg = transport.Config{TLS: tlsCfg, QUIC: cfg.QUIC, Logger: log, RevalidateEvery: cfg.RevalidateEvery,
		Refused: func(claimed string, err error) { n.handshakeRefused(claimed, err) }}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n, nil
}

// Name returns this node's name.
func (n *Node) Name() string { return n.name }

// refusalReceiptEvery is the least time between two receipts for
// handshakes refused under one claimed name: anyone can attempt a
// handshake, so receipts (ledger writes) for them are rate-limited; every
// refusal is still logged.
const refusalReceiptEvery = 10 * time.Second

// handshakeRefused records a receipt for a peer refused at the handshake.
func (n *Node) handshakeRefused(claimed string, err error) {
	who := claimed
	if who == "" {
		who = "(unnamed)"
	}
	now := n.cfg.Now()
	n.mu.Lock()
	last, seen := n.refusedAt[who]
	if seen && now.Sub(last) < refusalReceiptEvery {
		n.mu.Unlock()
		return
	}
	if len(n.refusedAt) >= 1024 {
		clear(n.refusedAt)
	}
	n.refusedAt[who] = now
	n.mu.Unlock()
	_, rerr := n.cfg.Store.AddReceipt(store.Receipt{
		Reason: pack.ReasonUnauthorized,
		Source: "peer:" + who,
		Detail: fmt.Sprintf("replication handshake refused: %v", err),
	})
	if rerr != nil {
		n.log.Warn("could not record a receipt", "err", rerr)
	}
}

// Listen opens the replication listener on the UDP address addr
// ("host:port"; port 0 picks one). Outbound connections then share its
// socket. Call Serve to accept.
func (n *Node) Listen(addr string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	if n.ep != nil {
		return errors.New("repl: already listening")
	}
	ep, err := transport.Listen(addr, n.tcfg)
	if err != nil {
		return err
	}
	n.ep = ep
	return nil
}

// Addr returns the listener's address, or nil before Listen.
func (n *Node) Addr() net.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ep == nil {
		return nil
	}
	return n.ep.Addr()
}

// Serve accepts connections until ctx ends or the node closes, serving
// each peer's control streams and chunk streams. It returns nil after
// Close or cancellation.
func (n *Node) Serve(ctx context.Context) error {
	n.mu.Lock()
	ep := n.ep
	n.mu.Unlock()
	if ep == nil {
		return ErrNotListening
	}
	ctx, cancel := mergeCancel(ctx, n.ctx)
	defer cancel()
	for {
		c, err := ep.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) || errors.Is(err, quic.ErrServerClosed) {
				return nil
			}
			return err
		}
		n.log.Debug("replication peer connected", "peer", c.Peer(), "remote", c.RemoteAddr())
		if _, err := n.startSession(c); err != nil {
			c.Close(0x0e, "node closing")
		}
	}
}

// mergeCancel returns a context done when either a or b is done.
func mergeCancel(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}

// endpoint returns the endpoint to dial from: the listener's, or a
// dial-only one made on first use.
func (n *Node) endpoint() (*transport.Endpoint, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrClosed
	}
	if n.ep != nil {
		return n.ep, nil
	}
	if n.dialer == nil {
		d, err := transport.NewDialer(n.tcfg)
		if err != nil {
			return nil, err
		}
		n.dialer = d
	}
	return n.dialer, nil
}

// session returns a live dialed session to peer, dialing it if needed.
func (n *Node) session(ctx context.Context, peer string) (*session, error) {
	dl := n.lockFor(n.dialLock, peer)
	dl.Lock()
	defer dl.Unlock()
	n.mu.Lock()
	if s := n.outbound[peer]; s != nil && s.conn.Context().Err() == nil {
		n.mu.Unlock()
		return s, nil
	}
	n.mu.Unlock()
	p, err := DialPeer(n.cfg.Cluster, peer)
	if err != nil {
		return nil, err
	}
	ep, err := n.endpoint()
	if err != nil {
		return nil, err
	}
	c, err := ep.Dial(ctx, peer, p.Addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, &DialError{Peer: peer, Addr: p.Addr, Err: err}
	}
	s, err := n.startSession(c)
	if err != nil {
		c.Close(0x0e, "node closing")
		return nil, err
	}
	n.mu.Lock()
	n.outbound[peer] = s
	n.mu.Unlock()
	return s, nil
}

// DialPeer returns the registry entry of the peer called name that a node
// of h can dial: one in the registry (else an error wrapping
// cluster.ErrNodeNotFound), not removed, and with an address (else an
// error wrapping ErrNoAddress).
func DialPeer(h *cluster.Home, name string) (cluster.Peer, error) {
	p, err := h.Peer(name)
	if err != nil {
		return cluster.Peer{}, err
	}
	if !p.Active() {
		return cluster.Peer{}, fmt.Errorf("repl: %s was removed from this node's registry (muser node ls)", name)
	}
	if p.Addr == "" {
		return cluster.Peer{}, fmt.Errorf("%w: %s; run 'muser node add %s HOST:PORT'", ErrNoAddress, name, name)
	}
	return p, nil
}

// lockFor returns the mutex for peer in one of the node's lock maps.
func (n *Node) lockFor(m map[string]*sync.Mutex, peer string) *sync.Mutex {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := m[peer]
	if l == nil {
		l = new(sync.Mutex)
		m[peer] = l
	}
	return l
}

// Close closes every connection and the listener and waits for the
// node's goroutines. Transfers in flight end; chunks already received stay
// on disk, invisible, for a retry.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	ep, d := n.ep, n.dialer
	n.mu.Unlock()
	n.cancel()
	var errs []error
	if ep != nil {
		errs = append(errs, ep.Close())
	}
	if d != nil {
		errs = append(errs, d.Close())
	}
	n.wg.Wait()
	return errors.Join(errs...)
}
