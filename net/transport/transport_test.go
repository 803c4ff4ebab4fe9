package transport

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muserhq/muser/net/cluster/clustertest"
	"github.com/muserhq/muser/net/internal/leakcheck"
	"github.com/muserhq/muser/net/mtls"
	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }

// refusals records the refusals an endpoint reports.
type refusals struct {
	mu    sync.Mutex
	names []string
	errs  []error
}

func (r *refusals) add(claimed string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names = append(r.names, claimed)
	r.errs = append(r.errs, err)
}

func (r *refusals) get() ([]string, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...), append([]error(nil), r.errs...)
}

func listen(t *testing.T, n *clustertest.Node, ref *refusals) *Endpoint {
	t.Helper()
	cfg := Config{TLS: n.TLS(t), RevalidateEvery: -1}
	if ref != nil {
		cfg.Refused = ref.add
	}
	e, err := Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func dialer(t *testing.T, n *clustertest.Node) *Endpoint {
	t.Helper()
	e, err := NewDialer(Config{TLS: n.TLS(t), RevalidateEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// echo accepts one connection and echoes every stream on it, returning
// the accepted connection on ch.
func echo(ctx context.Context, e *Endpoint, ch chan<- *Conn) {
	c, err := e.Accept(ctx)
	if err != nil {
		close(ch)
		return
	}
	ch <- c
	for {
		s, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		go func() {
			_, _ = io.Copy(s, s)
			s.Close()
		}()
	}
}

func TestConnectAndEcho(t *testing.T) {
	nodes := clustertest.New(t, "alpha", "beta")
	alpha, beta := nodes[0], nodes[1]
	srv := listen(t, alpha, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	accepted := make(chan *Conn, 1)
	go echo(ctx, srv, accepted)

	cli := dialer(t, beta)
	c, err := cli.Dial(ctx, "alpha", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if c.Peer() != "alpha" {
		t.Fatalf("client sees peer %q, want alpha", c.Peer())
	}
	sc := <-accepted
	if sc == nil || sc.Peer() != "beta" {
		t.Fatalf("server sees peer %v, want beta", sc)
	}
	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("a frame of KV")
	if _, err := s.Write(msg); err != nil {
		t.Fatal(err)
	}
	s.Close()
	got, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(msg) {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
	if st := c.Stats(); st.BytesSent == 0 || st.BytesReceived == 0 {
		t.Fatalf("stats %+v: want bytes sent and received", st)
	}
	if srv.Conns() != 1 {
		t.Fatalf("server holds %d connections, want 1", srv.Conns())
	}
	if err := c.Close(wire.CodeOK, "done"); err != nil {
		t.Fatal(err)
	}
}

func TestHandshakeRefusals(t *testing.T) {
	nodes := clustertest.New(t, "alpha", "beta")
	alpha, beta := nodes[0], nodes[1]
	ref := &refusals{}
	srv := listen(t, alpha, ref)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	accepted := make(chan *Conn, 4)
	go func() {
		for {
			c, err := srv.Accept(ctx)
			if err != nil {
				return
			}
			accepted <- c
		}
	}()

	// A node called beta, but of another cluster: its own CA.
	intruder := clustertest.Foreign(t, "beta")
	ic := intruder.TLS(t)
	ic.CA = alpha.TLS(t).CA // it even trusts alpha's CA; its own certificate is the problem
	// It must also admit alpha to get as far as presenting its certificate.
	clustertest.Admit(t, intruder, "alpha", "")

	// A node with a certificate of the right CA but not in alpha's
	// registry.
	ca, err := alpha.Cluster.CA()
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := ca.Issue("delta", time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	strangerCfg := &mtls.Config{Credential: stranger, CA: ca.Cert}

	tests := []struct {
		desc    string
		cfg     *mtls.Config
		dial    string
		remote  bool   // refused by the server (true) or by the dialer
		claimed string // the name the server's refusal reports
		want    string // in the server's refusal (remote) or the dial error (local)
	}{
		{"other CA", ic, "alpha", true, "beta", "unknown authority"},
		{"not enrolled", strangerCfg, "alpha", true, "delta", `"delta" is not enrolled`},
		{"dialed the wrong name", beta.TLS(t), "gamma", false, "", "not gamma"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			before, _ := ref.get()
			e, err := NewDialer(Config{TLS: tt.cfg, RevalidateEvery: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			_, err = e.Dial(ctx, tt.dial, srv.Addr().String())
			var we *wire.Error
			if !errors.As(err, &we) || we.Code != wire.CodeUnauthorized || we.Remote != tt.remote {
				t.Fatalf("Dial = %v, want a wire.Error unauthorized with remote=%v", err, tt.remote)
			}
			if !errors.Is(err, pack.ErrRefused) {
				t.Fatalf("Dial error %v is not pack.ErrRefused", err)
			}
			names, errs := ref.get()
			if !tt.remote {
				if !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Dial = %v, want it to contain %q", err, tt.want)
				}
				if len(names) != len(before) {
					t.Fatalf("server recorded a refusal for a handshake the client refused: %q", names[len(before):])
				}
				return
			}
			if len(names) != len(before)+1 {
				t.Fatalf("server refusals = %q, want one more than %q", names, before)
			}
			if got := names[len(names)-1]; got != tt.claimed {
				t.Fatalf("server refusal names %q, want %q", got, tt.claimed)
			}
			if got := errs[len(errs)-1]; !strings.Contains(got.Error(), tt.want) {
				t.Fatalf("server refusal %v, want it to contain %q", got, tt.want)
			}
		})
	}
	select {
	case c := <-accepted:
		t.Fatalf("the server accepted a connection from %q", c.Peer())
	default:
	}
}

func TestRemovedNodeIsDroppedAndRefused(t *testing.T) {
	nodes := clustertest.New(t, "alpha", "beta", "gamma")
	alpha, beta, gamma := nodes[0], nodes[1], nodes[2]
	ref := &refusals{}
	srv := listen(t, alpha, ref)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	accepted := make(chan *Conn, 2)
	go func() {
		for {
			c, err := srv.Accept(ctx)
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	cb, err := dialer(t, beta).Dial(ctx, "alpha", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cg, err := dialer(t, gamma).Dial(ctx, "alpha", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	<-accepted
	<-accepted

	// `muser node rm beta` on alpha, as another process would do it.
	other, err := clustertestOpen(alpha.Home)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.RemovePeer("beta", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := srv.Revalidate(); len(got) != 1 || got[0] != "beta" {
		t.Fatalf("Revalidate dropped %q, want [beta]", got)
	}
	// beta's connection is closed with the revocation code.
	<-cb.Context().Done()
	_, err = cb.OpenStream(ctx)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeRevoked || !we.Remote {
		t.Fatalf("beta's connection error = %v, want a remote revoked", err)
	}
	// gamma's connection lives on.
	if cg.Context().Err() != nil {
		t.Fatal("gamma's connection was closed too")
	}
	if _, err := cg.OpenStream(ctx); err != nil {
		t.Fatalf("gamma cannot open a stream: %v", err)
	}
	// A new connection from beta is refused at the handshake.
	_, err = dialer(t, beta).Dial(ctx, "alpha", srv.Addr().String())
	if !errors.As(err, &we) || we.Code != wire.CodeUnauthorized || !we.Remote {
		t.Fatalf("redial of a removed node = %v, want refused by the server", err)
	}
	names, _ := ref.get()
	if len(names) != 1 || names[0] != "beta" {
		t.Fatalf("server refusals %q, want [beta]", names)
	}
}

// TestDialerRefusesRemovedServer: the dialing side consults its own
// registry too; a node that removed alpha will not talk to it.
func TestDialerRefusesRemovedServer(t *testing.T) {
	nodes := clustertest.New(t, "alpha", "beta")
	alpha, beta := nodes[0], nodes[1]
	srv := listen(t, alpha, nil)
	if _, err := beta.Cluster.RemovePeer("alpha", time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err := dialer(t, beta).Dial(context.Background(), "alpha", srv.Addr().String())
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeUnauthorized || we.Remote || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("Dial = %v, want a local unauthorized naming the removal", err)
	}
}

func TestRevalidateLoop(t *testing.T) {
	nodes := clustertest.New(t, "alpha", "beta")
	alpha, beta := nodes[0], nodes[1]
	srv, err := Listen("127.0.0.1:0", Config{TLS: alpha.TLS(t), RevalidateEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			if _, err := srv.Accept(ctx); err != nil {
				return
			}
		}
	}()
	c, err := dialer(t, beta).Dial(ctx, "alpha", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alpha.Cluster.RemovePeer("beta", time.Now()); err != nil {
		t.Fatal(err)
	}
	// The loop drops the connection on its own; no call to Revalidate.
	<-c.Context().Done()
	_, err = c.AcceptStream(ctx)
	if !errors.Is(err, &wire.Error{Code: wire.CodeRevoked}) {
		t.Fatalf("error after revocation = %v, want revoked", err)
	}
}

func TestCloseEndsConnections(t *testing.T) {
	nodes := clustertest.New(t, "alpha", "beta")
	srv := listen(t, nodes[0], nil)
	ctx := context.Background()
	accepted := make(chan *Conn, 1)
	go echo(ctx, srv, accepted)
	c, err := dialer(t, nodes[1]).Dial(ctx, "alpha", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	<-accepted
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	<-c.Context().Done()
	if _, err := c.OpenStream(ctx); !errors.Is(err, &wire.Error{Code: wire.CodeUnavailable}) {
		t.Fatalf("after the server closed: %v, want unavailable", err)
	}
	if _, err := srv.Accept(ctx); err == nil {
		t.Fatal("Accept on a closed endpoint succeeded")
	}
}
