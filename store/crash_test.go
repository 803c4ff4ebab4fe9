package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

const crashEnv = "MUSER_STORE_CRASH_CHILD"

// crashChild is the child role of TestCrashSafety: it publishes packs (and
// now and then runs gc under a small budget) in a loop until it is killed.
func crashChild(dir string, seed uint64) {
	s, err := store.Open(dir, store.Options{BlockTokens: 4, OrphanGrace: -1})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	rng := rand.New(rand.NewPCG(seed, 1))
	id := packtest.Identity("crash")
	prefix := packtest.Tokens(seed%3, 8, 100)
	for i := 0; ; i++ {
		toks := append(append([]int32{}, prefix[:4*rng.IntN(3)]...), packtest.Tokens(seed*1000+uint64(i), 4*(1+rng.IntN(6)), 100)...)
		size := 512 * (1 + rng.IntN(64))
		get := storetest.KV(id, salt, toks, 4, size)
		if _, err := s.PublishPrefix(context.Background(), id, salt, toks, get); err != nil {
			fmt.Println("publish:", err)
			os.Exit(2)
		}
		if rng.IntN(8) == 0 {
			if _, err := s.GC(context.Background(), store.GCOptions{MaxBytes: 1 << 20}); err != nil {
				fmt.Println("gc:", err)
				os.Exit(2)
			}
		}
	}
}

// TestCrashSafety runs a child process that publishes packs and SIGKILLs
// it at a random instant, 60 times. After every kill the reopened store
// verifies clean (every chunk re-hashed), every visible pack restores in
// full, and gc reclaims every orphan the kill left.
func TestCrashSafety(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		seed, _ := strconv.ParseUint(os.Getenv(crashEnv+"_SEED"), 10, 64)
		crashChild(dir, seed)
		return
	}
	crashLoop(t, "TestCrashSafety", 60)
}

// crashLoop is the parent role of a crash test: it runs the test named
// name as a child process (its child role publishes into dir until it is
// killed) and SIGKILLs it at a random instant, kills times. After every
// kill the reopened store verifies clean (every chunk re-hashed), every
// visible pack restores in full, and gc reclaims every orphan the kill
// left.
func crashLoop(t *testing.T, name string, kills int) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(2026, 12))
	id := packtest.Identity("crash")
	killed, orphansSeen, packsSeen := 0, 0, 0
	for i := 0; i < kills; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir, crashEnv+"_SEED="+strconv.Itoa(i))
		storetest.KillChild(t, cmd, "ready", time.Duration(rng.IntN(40000))*time.Microsecond)
		killed++

		s, err := store.Open(dir, store.Options{OrphanGrace: -1})
		if err != nil {
			t.Fatalf("after kill %d: reopen: %v", i, err)
		}
		rep, err := s.Verify(context.Background(), store.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rep.Findings {
			t.Errorf("after kill %d: finding: %v", i, f)
		}
		orphansSeen += rep.Orphans
		packs, _ := s.Packs()
		packsSeen += len(packs)
		for _, p := range packs {
			n, err := s.RestorePack(context.Background(), store.RestoreRequest{Pack: p.ID, Identity: id}, func(int, []byte) error { return nil })
			if err != nil || n != p.Tokens {
				t.Fatalf("after kill %d: pack %s restores %d of %d tokens: %v", i, p.ID.Short(), n, p.Tokens, err)
			}
		}
		if i%10 == 9 {
			if _, err := s.GC(context.Background(), store.GCOptions{MaxBytes: -1}); err != nil {
				t.Fatal(err)
			}
			rep, err := s.Verify(context.Background(), store.VerifyOptions{NoData: true})
			if err != nil || rep.Orphans != 0 || len(rep.Findings) != 0 {
				t.Fatalf("after gc: %d orphans, findings %v, %v", rep.Orphans, rep.Findings, err)
			}
			if tmp := tempFiles(t, dir); len(tmp) != 0 {
				t.Fatalf("after gc: temporary files left: %v", tmp)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if packsSeen == 0 {
		t.Fatalf("no pack was published before any of %d kills: the test checked nothing", killed)
	}
	t.Logf("%d kills; %d packs and %d orphan chunk files seen across reopens (orphans reclaimed by gc)", killed, packsSeen, orphansSeen)
	storetest.CheckDir(t, dir, store.Options{})
}

func tempFiles(t *testing.T, dir string) []string {
	var out []string
	for _, f := range dataFiles(t, dir) {
		if len(f) > 0 && containsTemp(f) {
			out = append(out, f)
		}
	}
	return out
}

func containsTemp(path string) bool {
	for i := 0; i+5 <= len(path); i++ {
		if path[i:i+5] == ".tmp-" {
			return true
		}
	}
	return false
}
