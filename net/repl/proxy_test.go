package repl

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muserhq/muser/net/cluster/clustertest"
	"github.com/muserhq/muser/net/transport"
	"github.com/muserhq/muser/pack"
)

// flipProxy relays UDP between one client and a server and lets a test
// flip bits in the client's datagrams, as a faulty link would.
type flipProxy struct {
	front  *net.UDPConn // the client talks to this
	back   *net.UDPConn // this talks to the server
	server *net.UDPAddr
	client atomic.Pointer[net.UDPAddr]
	// flip decides, for the n-th datagram from the client (from 0),
	// whether to flip a bit in it.
	flip func(n int64) bool
	// drop, if not nil, drops datagrams in both directions while it
	// returns true.
	drop    func() bool
	seen    atomic.Int64
	flipped atomic.Int64
	wg      sync.WaitGroup
}

func newFlipProxy(t *testing.T, server net.Addr, flip func(n int64) bool, drop func() bool) *flipProxy {
	t.Helper()
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := &flipProxy{front: front, back: back, server: server.(*net.UDPAddr), flip: flip, drop: drop}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		buf := make([]byte, 1<<16)
		for {
			n, from, err := front.ReadFromUDP(buf)
			if err != nil {
				return
			}
			p.client.Store(from)
			if p.drop != nil && p.drop() {
				continue
			}
			if p.flip(p.seen.Add(1) - 1) {
				// The last byte is inside the AEAD tag: the packet
				// cannot authenticate.
				buf[n-1] ^= 0x01
				p.flipped.Add(1)
			}
			_, _ = back.WriteToUDP(buf[:n], p.server)
		}
	}()
	go func() {
		defer p.wg.Done()
		buf := make([]byte, 1<<16)
		for {
			n, _, err := back.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if p.drop != nil && p.drop() {
				continue
			}
			if c := p.client.Load(); c != nil {
				_, _ = front.WriteToUDP(buf[:n], c)
			}
		}
	}()
	t.Cleanup(func() {
		front.Close()
		back.Close()
		p.wg.Wait()
	})
	return p
}

func (p *flipProxy) addr() string { return p.front.LocalAddr().String() }

// TestCorruptingProxySomePackets: a link that corrupts one datagram in
// eight cannot alter a byte that arrives: QUIC drops the packets that fail
// authentication and resends their data, and the pack arrives whole.
func TestCorruptingProxySomePackets(t *testing.T) {
	nodes := newCluster(t, []string{"alpha", "beta"}, nil)
	alpha, beta := nodes[0], nodes[1]
	proxy := newFlipProxy(t, beta.repl.Addr(), func(n int64) bool { return n >= 20 && n%8 == 0 }, nil)
	clustertest.Admit(t, alpha.Node, "beta", proxy.addr())
	id, _ := publish(t, alpha.store, 21, 32)

	res, err := alpha.repl.Push(ctxT(t), "beta", id)
	if err != nil {
		t.Fatal(err)
	}
	if proxy.flipped.Load() == 0 {
		t.Fatal("the proxy corrupted nothing; the test proves nothing")
	}
	if res.LostBytes == 0 {
		t.Fatalf("QUIC resent nothing although %d datagrams were corrupted", proxy.flipped.Load())
	}
	if got, want := restoreAll(t, beta.store, id), restoreAll(t, alpha.store, id); !equalBlocks(got, want) {
		t.Fatal("bytes changed in flight reached the store")
	}
	if rs := receiptsFor(t, beta.store, pack.ReasonChunkDigest); len(rs) != 0 {
		t.Fatalf("chunk-digest receipts %+v: corrupted bytes got past QUIC", rs)
	}
	t.Logf("%d of %d datagrams corrupted; %d bytes resent; pack arrived intact", proxy.flipped.Load(), proxy.seen.Load(), res.LostBytes)
}

// TestCorruptingProxyAllPackets: a link that corrupts everything once the
// transfer is under way makes it fail (the connection times out), never
// succeed: no pack is published, what arrived intact before is kept.
func TestCorruptingProxyAllPackets(t *testing.T) {
	short := func(c *Config) {
		q := transport.DefaultQUIC()
		q.MaxIdleTimeout = 1500 * time.Millisecond
		q.KeepAlivePeriod = 300 * time.Millisecond
		c.QUIC = q
	}
	nodes := newCluster(t, []string{"alpha", "beta"}, map[string][]nodeOpt{"alpha": {short}, "beta": {short}})
	alpha, beta := nodes[0], nodes[1]
	proxy := newFlipProxy(t, beta.repl.Addr(), func(n int64) bool { return n >= 60 }, nil)
	clustertest.Admit(t, alpha.Node, "beta", proxy.addr())
	id, _ := publish(t, alpha.store, 22, 64)

	_, err := alpha.repl.Push(ctxT(t), "beta", id)
	if err == nil {
		t.Fatal("a push through a link that corrupts every packet succeeded")
	}
	t.Logf("push failed as it must: %v", err)
	waitFor(t, "beta's truncated receipt", func() bool { return len(receiptsFor(t, beta.store, pack.ReasonTruncated)) == 1 })
	if packCount(t, beta.store) != 0 {
		t.Fatal("a pack was published from a corrupted transfer")
	}
	if rs := receiptsFor(t, beta.store, pack.ReasonChunkDigest); len(rs) != 0 {
		t.Fatalf("chunk-digest receipts %+v: corrupted bytes got past QUIC", rs)
	}
}
