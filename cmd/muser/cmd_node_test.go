package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestClusterEnrollment(t *testing.T) {
	homeA, homeB := t.TempDir(), t.TempDir()
	bundle := filepath.Join(t.TempDir(), "beta.bundle")
	steps := []struct {
		desc string
		args []string
		code int
		want string // substring of stdout (code 0) or stderr
	}{
		{"init alpha", []string{"cluster", "init", "--home", homeA, "--name", "alpha"}, 0, `this node is "alpha", a CA holder`},
		{"init again", []string{"cluster", "init", "--home", homeA, "--name", "alpha"}, 1, "already present"},
		{"init bad name", []string{"cluster", "init", "--home", t.TempDir(), "--name", "Alpha"}, 2, "bad node name"},
		{"enroll without -o", []string{"node", "enroll", "--home", homeA, "beta"}, 2, "-o BUNDLE is required"},
		{"enroll beta", []string{"node", "enroll", "--home", homeA, "beta", "-o", bundle}, 0, `enrolled "beta"`},
		{"enroll over a file", []string{"node", "enroll", "--home", homeA, "gamma", "-o", bundle}, 1, "already exists"},
		{"join without bundle", []string{"node", "join", "--home", homeB, bundle + ".missing"}, 3, "no such file"},
		{"join beta", []string{"node", "join", "--home", homeB, bundle}, 0, `joined cluster`},
		{"join again", []string{"node", "join", "--home", homeB, bundle}, 1, "already present"},
		{"enroll on a joined node", []string{"node", "enroll", "--home", homeB, "gamma", "-o", bundle + ".2"}, 1, "not a CA holder"},
		{"add alpha on beta", []string{"node", "add", "--home", homeB, "alpha", "127.0.0.1:7443"}, 0, `updated "alpha" (127.0.0.1:7443)`},
		{"add beta on alpha", []string{"node", "add", "--home", homeA, "beta", "127.0.0.1:7444"}, 0, `updated "beta" (127.0.0.1:7444)`},
		{"add bad addr", []string{"node", "add", "--home", homeA, "beta", "nowhere"}, 2, "missing port"},
		{"add new", []string{"node", "add", "--home", homeA, "delta", "[::1]:7000"}, 0, `added "delta" ([::1]:7000)`},
		{"admit without address", []string{"node", "add", "--home", homeA, "epsilon"}, 0, `added "epsilon" (no address)`},
		{"ls", []string{"node", "ls", "--home", homeA}, 0, "127.0.0.1:7444  active"},
		{"rm beta", []string{"node", "rm", "--home", homeA, "beta"}, 0, `removed "beta"`},
		{"rm unknown", []string{"node", "rm", "--home", homeA, "zeta"}, 3, "node not found"},
		{"ls after rm", []string{"node", "ls", "--home", homeA}, 0, "removed"},
		{"readmit", []string{"node", "add", "--home", homeA, "beta", "127.0.0.1:7444"}, 0, "readmitted"},
		{"ls uninitialized", []string{"node", "ls", "--home", t.TempDir()}, 1, "no cluster identity"},
	}
	for _, s := range steps {
		code, stdout, stderr := runCLI(t, s.args...)
		out := stdout
		if s.code != 0 {
			out = stderr
		}
		if code != s.code || !strings.Contains(out, s.want) {
			t.Fatalf("%s: muser %s: exit %d, want %d; output %q, want it to contain %q (stderr %q)",
				s.desc, strings.Join(s.args, " "), code, s.code, out, s.want, stderr)
		}
	}
	st, err := os.Stat(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("bundle mode = %o, want 600", st.Mode().Perm())
	}

	code, stdout, _ := runCLI(t, "node", "ls", "--home", homeB, "--json")
	if code != 0 {
		t.Fatalf("node ls --json: exit %d", code)
	}
	var ls struct {
		ClusterID string    `json:"cluster_id"`
		Name      string    `json:"name"`
		CAHolder  bool      `json:"ca_holder"`
		NotAfter  time.Time `json:"cert_not_after"`
		Peers     []struct {
			Name  string `json:"name"`
			Addr  string `json:"addr"`
			State string `json:"state"`
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(stdout), &ls); err != nil {
		t.Fatalf("node ls --json: %v in %q", err, stdout)
	}
	if ls.Name != "beta" || ls.CAHolder || len(ls.Peers) != 1 || ls.Peers[0].Name != "alpha" ||
		ls.Peers[0].Addr != "127.0.0.1:7443" || ls.Peers[0].State != "active" || len(ls.ClusterID) != 32 ||
		ls.NotAfter.Before(time.Now().Add(365*24*time.Hour)) {
		t.Fatalf("node ls --json on beta = %+v, want beta (not CA holder) admitting alpha at 127.0.0.1:7443", ls)
	}
}
