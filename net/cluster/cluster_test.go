package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muserhq/muser/net/mtls"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func initHome(t *testing.T, name string) (*Home, string) {
	t.Helper()
	dir := t.TempDir()
	h, err := Init(dir, name, t0)
	if err != nil {
		t.Fatal(err)
	}
	return h, dir
}

// join enrolls name on ca and joins it in a fresh data directory.
func join(t *testing.T, ca *Home, name string, now time.Time) (*Home, *mtls.Bundle) {
	t.Helper()
	b, err := ca.Enroll(name, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Join(t.TempDir(), b, now)
	if err != nil {
		t.Fatal(err)
	}
	return h, b
}

func TestInitFilesAndModes(t *testing.T) {
	h, dir := initHome(t, "alpha")
	st, err := os.Stat(Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o700 {
		t.Errorf("cluster dir mode = %o, want 700", got)
	}
	for _, name := range []string{infoFile, caCertFile, caKeyFile, nodeCertFile, nodeKeyFile, linkFile, peersFile} {
		st, err := os.Stat(filepath.Join(Dir(dir), name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := st.Mode().Perm(); got != 0o600 {
			t.Errorf("%s mode = %o, want 600", name, got)
		}
	}
	if !h.CAHolder() {
		t.Error("CAHolder() = false after Init, want true")
	}
	if _, err := h.Credential(t0); err != nil {
		t.Errorf("Credential: %v", err)
	}
	h2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if h2.Info() != h.Info() {
		t.Errorf("Open().Info() = %+v, want %+v", h2.Info(), h.Info())
	}
	if _, err := Init(dir, "alpha", t0); !errors.Is(err, ErrInitialized) {
		t.Errorf("second Init = %v, want ErrInitialized", err)
	}
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("Open(empty) = %v, want ErrNotInitialized", err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".cluster.tmp*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary directories left behind: %v", leftovers)
	}
}

func TestEnrollJoin(t *testing.T) {
	alpha, _ := initHome(t, "alpha")
	beta, b := join(t, alpha, "beta", t0)
	if beta.Name() != "beta" || beta.Info().ClusterID != alpha.Info().ClusterID {
		t.Fatalf("joined node info = %+v, want beta in cluster %s", beta.Info(), alpha.Info().ClusterID)
	}
	if beta.CAHolder() {
		t.Error("joined node is a CA holder, want not")
	}
	s1, err := alpha.LinkSecret()
	if err != nil {
		t.Fatal(err)
	}
	s2, err := beta.LinkSecret()
	if err != nil {
		t.Fatal(err)
	}
	if s1 != s2 || s1 != b.LinkSecret {
		t.Error("link secrets differ between the CA holder, the bundle and the joined node")
	}
	// Each side admits the other.
	ca, _ := alpha.CA()
	betaCred, err := beta.Credential(t0)
	if err != nil {
		t.Fatal(err)
	}
	alphaCred, err := alpha.Credential(t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := alpha.Authorize("beta", betaCred.Cert); err != nil {
		t.Errorf("alpha refuses beta: %v", err)
	}
	if err := beta.Authorize("alpha", alphaCred.Cert); err != nil {
		t.Errorf("beta refuses alpha: %v", err)
	}
	if err := betaCred.Check(ca.Cert, t0); err != nil {
		t.Error(err)
	}
	// A joined node cannot enroll.
	if _, err := beta.Enroll("gamma", t0, 0); !errors.Is(err, ErrNotCAHolder) {
		t.Errorf("Enroll on a joined node = %v, want ErrNotCAHolder", err)
	}
	if _, err := alpha.Enroll("alpha", t0, 0); err == nil {
		t.Error("enrolling the CA holder's own name succeeded")
	}
	// Joining twice into one home is refused.
	if _, err := Join(filepath.Dir(beta.Path()), b, t0); !errors.Is(err, ErrInitialized) {
		t.Errorf("second Join = %v, want ErrInitialized", err)
	}
	// An expired bundle is refused.
	if _, err := Join(t.TempDir(), b, t0.Add(mtls.DefaultNodeValidity+time.Hour)); !errors.Is(err, mtls.ErrBadCredential) {
		t.Errorf("Join of an expired bundle = %v, want ErrBadCredential", err)
	}
}

func TestAddRemoveAuthorize(t *testing.T) {
	alpha, _ := initHome(t, "alpha")
	beta, _ := join(t, alpha, "beta", t0)
	betaCred, err := beta.Credential(t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alpha.AddPeer("beta", "127.0.0.1:7070", t0); err != nil {
		t.Fatal(err)
	}
	p, err := alpha.Peer("beta")
	if err != nil || p.Addr != "127.0.0.1:7070" || !p.Active() {
		t.Fatalf("Peer(beta) = %+v, %v; want active at 127.0.0.1:7070", p, err)
	}
	// Another process (here, another Home on the same directory) removes
	// beta; the first Home sees it at the next authorization.
	other, err := Open(filepath.Dir(alpha.Path()))
	if err != nil {
		t.Fatal(err)
	}
	tRemove := t0.Add(time.Hour)
	if _, err := other.RemovePeer("beta", tRemove); err != nil {
		t.Fatal(err)
	}
	if err := alpha.Authorize("beta", betaCred.Cert); !errors.Is(err, mtls.ErrUnauthorized) || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("Authorize(removed beta) = %v, want ErrUnauthorized naming the removal", err)
	}
	if _, err := alpha.RemovePeer("nobody", t0); !errors.Is(err, ErrNodeNotFound) {
		t.Errorf("RemovePeer(unknown) = %v, want ErrNodeNotFound", err)
	}
	if err := alpha.Authorize("nobody", betaCred.Cert); !errors.Is(err, mtls.ErrUnauthorized) {
		t.Errorf("Authorize(unknown) = %v, want ErrUnauthorized", err)
	}
	// Readmitting beta does not readmit its old certificate.
	if _, err := alpha.AddPeer("beta", "127.0.0.1:7070", tRemove.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := alpha.Authorize("beta", betaCred.Cert); !errors.Is(err, mtls.ErrUnauthorized) || !strings.Contains(err.Error(), "before its removal") {
		t.Fatalf("Authorize(old cert after readmit) = %v, want a refusal naming the removal", err)
	}
	// A certificate issued after the removal (beyond the clock-skew
	// backdating) is admitted.
	b2, err := alpha.Enroll("beta", tRemove.Add(2*mtls.ClockSkew), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := alpha.Authorize("beta", b2.Node.Cert); err != nil {
		t.Fatalf("Authorize(new cert) = %v, want nil", err)
	}
	peers, err := alpha.Peers()
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 1 || peers[0].Name != "beta" || !peers[0].RevokedBefore.Equal(tRemove) {
		t.Fatalf("Peers() = %+v, want beta revoked before %v", peers, tRemove)
	}
}

func TestAddPeerRefusals(t *testing.T) {
	alpha, _ := initHome(t, "alpha")
	tests := []struct{ name, addr, want string }{
		{"Beta", "127.0.0.1:1", "bad node name"},
		{"alpha", "127.0.0.1:1", "own name"},
		{"beta", "127.0.0.1", "missing port"},
		{"beta", "127.0.0.1:0", "port"},
		{"beta", "127.0.0.1:99999", "port"},
		{"beta", ":80", "no host"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"@"+tt.addr, func(t *testing.T) {
			_, err := alpha.AddPeer(tt.name, tt.addr, t0)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("AddPeer = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestConcurrentUpdates runs registry updates from several Homes at once
// (as several processes would); the file lock keeps every one.
func TestConcurrentUpdates(t *testing.T) {
	_, dir := initHome(t, "alpha")
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := Open(dir)
			if err != nil {
				errs <- err
				return
			}
			_, err = h.AddPeer(fmt.Sprintf("n%d", i), fmt.Sprintf("10.0.0.%d:7000", i+1), t0)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	h, _ := Open(dir)
	peers, err := h.Peers()
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != n {
		t.Fatalf("got %d peers, want %d", len(peers), n)
	}
}

func TestRegistryDecode(t *testing.T) {
	tests := []struct{ desc, in, want string }{
		{"ok", `{"version":1,"peers":[{"name":"a","added":"2026-01-01T00:00:00Z"}]}`, ""},
		{"empty list", `{"version":1,"peers":[]}`, ""},
		{"null list", `{"version":1,"peers":null}`, ""},
		{"version", `{"version":2,"peers":[]}`, "version 2"},
		{"unknown field", `{"version":1,"peers":[],"x":1}`, "unknown field"},
		{"bad name", `{"version":1,"peers":[{"name":"A"}]}`, "bad node name"},
		{"duplicate", `{"version":1,"peers":[{"name":"a"},{"name":"a"}]}`, "twice"},
		{"bad addr", `{"version":1,"peers":[{"name":"a","addr":"nope"}]}`, `peer "a"`},
		{"trailing", `{"version":1,"peers":[]} {}`, "after"},
		{"not json", `peers`, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := decodeRegistry([]byte(tt.in))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrBadRegistry) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrBadRegistry containing %q", err, tt.want)
			}
		})
	}
}

func TestDamagedRegistryRefusesAll(t *testing.T) {
	alpha, dir := initHome(t, "alpha")
	beta, _ := join(t, alpha, "beta", t0)
	cred, _ := beta.Credential(t0)
	path := filepath.Join(Dir(dir), peersFile)
	if err := os.WriteFile(path, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := alpha.Authorize("beta", cred.Cert)
	if !errors.Is(err, mtls.ErrUnauthorized) || !strings.Contains(err.Error(), peersFile) {
		t.Fatalf("Authorize with a damaged registry = %v, want ErrUnauthorized naming %s", err, peersFile)
	}
}

// FuzzDecodeRegistry checks that the registry decoder never panics and that
// what it accepts survives an encode/decode round trip.
func FuzzDecodeRegistry(f *testing.F) {
	f.Add([]byte(`{"version":1,"peers":[{"name":"a","addr":"h:1","added":"2026-01-01T00:00:00Z","removed":"2026-01-02T00:00:00Z"}]}`))
	f.Add([]byte(`{"version":1,"peers":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		peers, err := decodeRegistry(data)
		if err != nil {
			if !errors.Is(err, ErrBadRegistry) {
				t.Fatalf("error %v does not wrap ErrBadRegistry", err)
			}
			return
		}
		enc, err := encodeRegistry(peers)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeRegistry(enc)
		if err != nil {
			t.Fatalf("re-encoded registry does not decode: %v", err)
		}
		if len(again) != len(peers) {
			t.Fatalf("round trip: %d peers, want %d", len(again), len(peers))
		}
	})
}

func TestGenerations(t *testing.T) {
	h, dir := initHome(t, "alpha")
	clock := t0
	now := func() time.Time { return clock }
	g := h.Generations(now)
	var last uint64
	for i := range 5 {
		n, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		if n <= last {
			t.Fatalf("call %d: generation %d, want > %d", i, n, last)
		}
		last = n
	}
	if want := uint64(t0.UnixNano()); last < want {
		t.Fatalf("generation %d, want at least the clock's %d", last, want)
	}
	// A restart with the clock stepped back an hour still goes up.
	clock = t0.Add(-time.Hour)
	h2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := h2.Generations(now).Next()
	if err != nil {
		t.Fatal(err)
	}
	if n <= last {
		t.Fatalf("after restart with the clock stepped back: %d, want > %d", n, last)
	}
	st, err := os.Stat(filepath.Join(Dir(dir), genFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("seal.gen: %v, mode %v; want mode 600", err, st)
	}
	if err := os.WriteFile(filepath.Join(Dir(dir), genFile), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h3, _ := Open(dir)
	if _, err := h3.Generations(now).Next(); !errors.Is(err, ErrBadRegistry) {
		t.Fatalf("Next with a damaged seal.gen = %v, want ErrBadRegistry", err)
	}
}

// FuzzDecodeInfo checks that the cluster.json decoder never panics and
// accepts only valid names and cluster IDs.
func FuzzDecodeInfo(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := decodeInfo(data)
		if err != nil {
			if !errors.Is(err, ErrBadRegistry) {
				t.Fatalf("error %v does not wrap ErrBadRegistry", err)
			}
			return
		}
		if mtls.ValidateName(info.Name) != nil || len(info.ClusterID) != 2*mtls.ClusterIDLen {
			t.Fatalf("accepted %+v", info)
		}
	})
}
