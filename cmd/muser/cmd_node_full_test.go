package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muserhq/muser/net/cluster"
)

// TestNodeEnrollFullRegistry: a registry holding cluster.MaxPeers peers
// takes no more. node enroll of one more name is refused like node add of
// one more, with no bundle written, and the registry stays readable: the
// cluster keeps admitting its peers and node ls still lists them.
func TestNodeEnrollFullRegistry(t *testing.T) {
	home := t.TempDir()
	if code, _, errOut := muser(t, home, "cluster", "init", "--name", "alpha"); code != exitOK {
		t.Fatalf("cluster init: exit %d, %s", code, errOut)
	}
	// Fill the registry as node add would, MaxPeers times over (written
	// at once: one node add per peer would rewrite the file each time).
	peers := make([]cluster.Peer, cluster.MaxPeers)
	added := time.Now().UTC().Truncate(time.Second)
	for i := range peers {
		peers[i] = cluster.Peer{Name: fmt.Sprintf("n%04d", i), Added: added}
	}
	b, err := json.Marshal(struct {
		Version int            `json:"version"`
		Peers   []cluster.Peer `json:"peers"`
	}{1, peers})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cluster.Dir(home), "peers.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := muser(t, home, "node", "ls", "--json"); code != exitOK || !strings.Contains(out, `"n4095"`) {
		t.Fatalf("node ls of a full registry: exit %d, %s", code, errOut)
	}

	bundle := filepath.Join(t.TempDir(), "extra.bundle")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"node add", []string{"node", "add", "extra", "127.0.0.1:7000"}},
		{"node enroll", []string{"node", "enroll", "extra", "-o", bundle}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := muser(t, home, tc.args...)
			if code != exitFailure || !strings.Contains(errOut, "limit") {
				t.Errorf("%v on a full registry: exit %d, stderr %q; want exit %d naming the limit", tc.args, code, errOut, exitFailure)
			}
			if _, err := os.Stat(bundle); err == nil {
				t.Errorf("%v was refused but wrote %s", tc.args, bundle)
			}
			code, out, errOut := muser(t, home, "node", "ls")
			if code != exitOK || !strings.Contains(out, "n4095") || strings.Contains(out, "extra") {
				t.Errorf("node ls after %v: exit %d, stderr %q; want the %d peers, without extra", tc.args, code, errOut, cluster.MaxPeers)
			}
		})
	}
	// An existing peer is still enrolled again (a new certificate).
	if code, _, errOut := muser(t, home, "node", "enroll", "n0007", "-o", bundle+".again"); code != exitOK {
		t.Errorf("enroll of a registered name on a full registry: exit %d, %s", code, errOut)
	}
}
