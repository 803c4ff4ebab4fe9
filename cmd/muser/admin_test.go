package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muserhq/muser/serve"
	"github.com/muserhq/muser/serve/adminapi"
	"github.com/muserhq/muser/store"
)

// startAdminServer serves the model on home's store and returns a
// function that stops it.
func startAdminServer(t *testing.T, home string) func() {
	t.Helper()
	s, err := serve.New(serve.Options{ModelPath: stories(t), Home: home, StoreNoSync: true, Ctx: 256, Threads: 1,
		Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	// Serve writes the serve file once it listens.
	for {
		if _, err := adminapi.Dial(context.Background(), home); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestLiveAdministration runs every store command against the home of a
// running server: the same output and exit codes as on the closed store,
// the changes carried out by the server.
func TestLiveAdministration(t *testing.T) {
	home, ids := fillStore(t, 5)
	// Exported first: an export marks the pack used.
	file := filepath.Join(t.TempDir(), "p3.kvpack")
	if code, _, errOut := muser(t, home, "pack", "export", ids[3].String(), "-o", file); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	damaged, _ := os.ReadFile(file)
	damaged[len(damaged)/2] ^= 1
	bad := filepath.Join(t.TempDir(), "bad.kvpack")
	os.WriteFile(bad, damaged, 0o600)
	for _, args := range [][]string{{"cluster", "init", "--name", "alpha"}, {"node", "add", "beta", "127.0.0.1:7444"}} {
		if code, out, errOut := muser(t, home, args...); code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	read := [][]string{
		{"node", "ls"},
		{"node", "ls", "--json"},
		{"pack", "ls"},
		{"pack", "ls", "--json"},
		{"pack", "inspect", ids[2].String()[:12]},
		{"pack", "inspect", "--json", ids[1].String()},
		{"pack", "verify"},
		{"pack", "verify", "--json", ids[0].String()[:8]},
		{"receipts", "ls"},
		{"receipts", "ls", "--json"},
		{"pack", "gc", "--dry-run", "--max-bytes", "1"},
		{"pack", "inspect", "ffffffffffff"},
		{"pack", "inspect", "zz"},
		{"receipts", "show", "0000"},
		{"pack", "verify", "--read-data-subset", "3/2"},
	}
	type result struct {
		code        int
		out, stderr string
	}
	direct := map[string]result{}
	for _, args := range read {
		code, out, errOut := muser(t, home, args...)
		direct[strings.Join(args, " ")] = result{code, out, errOut}
	}
	damagedChunk := func() string {
		s, err := store.Open(home, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		m, err := s.Manifest(ids[1])
		if err != nil {
			t.Fatal(err)
		}
		return chunkPathOf(home, m.Chunks[len(m.Chunks)-1].ID)
	}()
	stop := startAdminServer(t, home)
	if _, err := os.Stat(filepath.Join(home, adminapi.ServeFileName)); err != nil {
		t.Fatalf("the running server wrote no serve file: %v", err)
	}
	t.Run("read", func(t *testing.T) {
		for _, args := range read {
			name := strings.Join(args, " ")
			code, out, errOut := muser(t, home, args...)
			want := direct[name]
			if code != want.code || out != want.out || errOut != want.stderr {
				t.Errorf("%s against the running server: exit %d\n%s%s\nwant exit %d\n%s%s", name, code, out, errOut, want.code, want.out, want.stderr)
			}
			if code == exitLocked {
				t.Errorf("%s: exit %d (locked) though a muser server owns the store", name, code)
			}
		}
	})
	t.Run("export of a damaged pack", func(t *testing.T) {
		flipByte(t, damagedChunk, 0)
		out := filepath.Join(t.TempDir(), "p1.kvpack")
		code, stdout, errOut := muser(t, home, "pack", "export", ids[1].String(), "-o", out)
		if code == 0 || !strings.Contains(errOut, ids[1].Short()) {
			t.Errorf("export of a pack with a flipped chunk through the server: exit %d\n%s%s\nwant a failure naming the pack", code, stdout, errOut)
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "*")); len(left) != 0 {
			t.Errorf("after the failed export, %v left beside the output; want nothing", left)
		}
	})
	t.Run("change", func(t *testing.T) {
		live := filepath.Join(t.TempDir(), "p2.kvpack")
		for _, tc := range []struct {
			args []string
			code int
			out  string
		}{
			{[]string{"pack", "pin", ids[0].String()[:10]}, 0, "pinned pack " + ids[0].Short()},
			{[]string{"pack", "ls"}, 0, "pinned"},
			{[]string{"pack", "unpin", ids[0].String()[:10]}, 0, "unpinned pack " + ids[0].Short()},
			{[]string{"pack", "rm", ids[4].String()}, 0, "removed pack " + ids[4].Short()},
			{[]string{"pack", "rm", ids[4].String()}, exitNotFound, ""},
			{[]string{"pack", "rm", ids[3].String()[:9]}, 0, "removed pack " + ids[3].Short()},
			{[]string{"pack", "import", file}, 0, "imported pack " + ids[3].String()},
			{[]string{"pack", "import", file}, exitRefused, ""}, // a replay
			{[]string{"pack", "import", bad}, exitRefused, ""},
			// Export through the server (a later seal generation than the
			// file above), then a round trip of its file.
			{[]string{"pack", "export", ids[2].String()[:10], "-o", live}, 0, ""},
			{[]string{"pack", "export", "ffffffffffff", "-o", live + ".x"}, exitNotFound, ""},
			{[]string{"pack", "rm", ids[2].String()}, 0, "removed pack " + ids[2].Short()},
			{[]string{"pack", "import", live}, 0, "imported pack " + ids[2].String()},
			{[]string{"receipts", "ls"}, 0, "replay"},
			{[]string{"pack", "gc", "--max-bytes", "0", "--grace", "0"}, 0, "removed 4 packs"},
		} {
			code, out, errOut := muser(t, home, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.out) {
				t.Errorf("%s: exit %d\n%s%s\nwant exit %d and %q", strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.out)
			}
		}
	})
	stop()
	if _, err := os.Stat(filepath.Join(home, adminapi.ServeFileName)); !os.IsNotExist(err) {
		t.Errorf("after the server stopped, serve file: %v; want it removed", err)
	}
	s, err := store.Open(home, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ps, _ := s.Packs(); len(ps) != 0 {
		t.Errorf("after gc through the server: %d packs on disk, want 0", len(ps))
	}
}

// TestForeignLock: a store held by a process that is not a muser server
// of this home still gives exit status 5, serve file or not.
func TestForeignLock(t *testing.T) {
	home, _ := fillStore(t, 1)
	s, err := store.Open(home, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("no true command: %v", err)
	}
	for _, tc := range []struct {
		name  string
		setup func()
	}{
		{"no serve file", func() {}},
		{"dead pid", func() {
			adminapi.WriteServeFile(home, adminapi.ServeFile{URL: "http://127.0.0.1:1", PID: dead.Process.Pid})
		}},
		{"live pid, nothing listening", func() {
			adminapi.WriteServeFile(home, adminapi.ServeFile{URL: "http://127.0.0.1:1", PID: os.Getpid()})
		}},
		{"garbage", func() { os.WriteFile(filepath.Join(home, adminapi.ServeFileName), []byte("{"), 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			for _, args := range [][]string{{"pack", "ls"}, {"pack", "gc"}, {"receipts", "ls"}} {
				if code, out, errOut := muser(t, home, args...); code != exitLocked {
					t.Errorf("%s: exit %d\n%s%s\nwant %d", strings.Join(args, " "), code, out, errOut, exitLocked)
				}
			}
		})
	}
}
