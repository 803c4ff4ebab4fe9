package main

import (
	"errors"
	"testing"
	"time"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/net/repl"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve/dashboard"
)

// TestDashboardCluster: a node of a cluster without replication flags
// shows its cluster and peers, each peer's replication figures
// unavailable with the reason; the watch records pushes and producer
// outcomes.
func TestDashboardCluster(t *testing.T) {
	home := t.TempDir()
	now := time.Now()
	h, err := cluster.Init(home, "alpha", now)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ name, addr string }{{"gamma", ""}, {"beta", "127.0.0.1:7001"}} {
		if _, err := h.AddPeer(p.name, p.addr, now); err != nil {
			t.Fatal(err)
		}
	}
	cs := dashboardCluster(h, nil)()
	if cs == nil || cs.Node != "alpha" || cs.ClusterID != h.Info().ClusterID || cs.Producer != nil || cs.ReplAddr != "" {
		t.Fatalf("got %+v, want node alpha of cluster %s, no producer, no listener", cs, h.Info().ClusterID)
	}
	if len(cs.Peers) != 2 || cs.Peers[0].Name != "beta" || cs.Peers[0].Addr != "127.0.0.1:7001" || cs.Peers[1].Name != "gamma" {
		t.Fatalf("peers: got %+v, want beta (with its address) then gamma", cs.Peers)
	}
	for _, p := range cs.Peers {
		if p.ReplicateTo || p.LastPush != nil || !p.Active {
			t.Errorf("peer %s: got %+v, want active, not replicated to, no last push", p.Name, p)
		}
		for name, f := range map[string]dashboard.Figure{"queue": p.Queue, "pushed": p.Pushed, "refused": p.Refused,
			"retries": p.Retries, "dropped": p.Dropped} {
			if f.Tag != dashboard.TagUnavailable || f.Reason == "" || f.Value != nil {
				t.Errorf("peer %s %s: got %+v, want unavailable with a reason", p.Name, name, f)
			}
		}
	}

	w := newReplWatch()
	var id pack.Digest
	id[0] = 7
	w.onPush("beta")(repl.Result{Pack: id, Chunks: 3, Moved: 2, MovedBytes: 4096, Duration: 1500 * time.Microsecond}, nil)
	w.onPush("beta")(repl.Result{Pack: id}, errors.New("peer unreachable (test)"))
	lp := w.lastPush["beta"]
	if lp.OK || lp.Error != "peer unreachable (test)" || lp.Pack != id.String() {
		t.Errorf("last push: got %+v, want the failed second attempt", lp)
	}
	w.outcome("remote", nil)
	w.outcome("fallback", errors.New("producer down (test)"))
	if w.outcomes["remote"] != 1 || w.outcomes["fallback"] != 1 || w.last != "fallback" || w.lastErr != "producer down (test)" {
		t.Errorf("outcomes: got %v, last %q (%q); want one remote, one fallback, the last a fallback with its error", w.outcomes, w.last, w.lastErr)
	}
}
