package transport

import (
	"context"
	"testing"
	"time"

	"github.com/muserhq/muser/net/cluster/clustertest"
	"github.com/quic-go/quic-go"
)

// An admitted peer that completes its handshake but grants no
// unidirectional stream credit never takes its welcome; the listener
// admits other peers meanwhile (each connection is welcomed on its own)
// and drops that one once the handshake's time bound has passed.
func TestAcceptNotHeldByPeerWithoutStreamCredit(t *testing.T) {
	nodes := clustertest.New(t, "alpha", "beta", "gamma")
	alpha, beta, gamma := nodes[0], nodes[1], nodes[2]
	srv := listen(t, alpha, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			c, err := srv.Accept(ctx)
			if err != nil {
				return
			}
			defer c.Close(0, "")
		}
	}()

	cc, err := beta.TLS(t).Client("alpha")
	if err != nil {
		t.Fatal(err)
	}
	qc, err := quic.DialAddr(ctx, srv.Addr().String(), cc, &quic.Config{MaxIncomingUniStreams: -1, KeepAlivePeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer qc.CloseWithError(0, "")

	// A liveness bound only: before the change, gamma waited for as long
	// as beta's connection lived.
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer dcancel()
	c, err := dialer(t, gamma).Dial(dctx, "alpha", srv.Addr().String())
	if err != nil {
		t.Fatalf("gamma could not connect to alpha while beta's connection waited for its welcome: %v", err)
	}
	c.Close(0, "")
	select {
	case <-qc.Context().Done():
	case <-dctx.Done():
		t.Fatal("beta's connection, which never took its welcome, was not dropped")
	}
}
