package tier_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/tier"
	"github.com/muserhq/muser/store/tier/tiertest"
)

// crashEnv names the child's store directory; crashEnv+"_TIER" the
// endpoint, bucket, prefix and pack it restores.
const crashEnv = "MUSER_TIER_CRASH_CHILD"

// TestCrashDuringInstallAfterRestore kills, at a random instant, a
// process that restores a pack from the tier, installs it, removes it and
// starts again, 20 times. After every kill the reopened store verifies
// clean and holds the pack whole (it restores in full, the tier's bytes)
// or not at all: the install that follows a streamed restore keeps the
// store's crash rule (a whole pack or none).
func TestCrashDuringInstallAfterRestore(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir, os.Getenv(crashEnv+"_TIER"))
		return
	}
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	f := newFixture(t)
	_, want := restoreAll(t, f.a, f.id, f.salt, f.tokens)
	dir := t.TempDir()
	spec := fmt.Sprintf("%s %s %s %s", f.srv.Endpoint, f.bucket, f.prefix, f.pack)
	rng := rand.New(rand.NewPCG(2026, 12))
	whole := 0
	for i := range 20 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDuringInstallAfterRestore$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir, crashEnv+"_TIER="+spec)
		storetest.KillChild(t, cmd, "ready", time.Duration(rng.IntN(200_000))*time.Microsecond)
		s, err := store.Open(dir, store.Options{BlockTokens: 16})
		if err != nil {
			t.Fatalf("after kill %d: reopen: %v", i, err)
		}
		storetest.Check(t, s)
		ps, _ := s.Packs()
		if len(ps) > 1 {
			t.Fatalf("after kill %d: %d packs, want 0 or 1", i, len(ps))
		}
		if len(ps) == 1 {
			whole++
			n, got := restoreAll(t, s, f.id, f.salt, f.tokens)
			if n != 80 {
				t.Fatalf("after kill %d: the pack restores %d tokens, want 80", i, n)
			}
			checkBlocks(t, got, want)
			if _, err := s.Remove(ps[0].ID); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("20 kills; the pack whole after %d of them, absent after the others", whole)
}

// crashChild is the child role: restore, install, remove, in a loop
// until it is killed.
func crashChild(dir, spec string) {
	fail := func(what string, err error) {
		fmt.Println(what+":", err)
		os.Exit(2)
	}
	var endpoint, bucket, prefix, pid string
	if _, err := fmt.Sscan(spec, &endpoint, &bucket, &prefix, &pid); err != nil {
		fail("spec", err)
	}
	id, err := pack.ParseDigest(pid)
	if err != nil {
		fail("pack", err)
	}
	tr, err := tier.Open(tier.Config{Location: tier.Location{Bucket: bucket, Prefix: prefix}, Endpoint: endpoint,
		AccessKey: tiertest.AccessKey, SecretKey: tiertest.SecretKey, Key: testKey, Producer: "child"})
	if err != nil {
		fail("tier", err)
	}
	s, err := store.Open(dir, store.Options{Node: "child", BlockTokens: 16, OrphanGrace: -1})
	if err != nil {
		fail("open", err)
	}
	fx := newFixtureTokens()
	fmt.Println("ready")
	ctx := context.Background()
	for {
		req := tier.RestoreRequest{Pack: id, Identity: fx.id, Salt: fx.salt, Tokens: fx.tokens}
		n, fetched, err := tr.Restore(ctx, s, req, func(int, []byte) error { return nil })
		if err != nil || n != 80 {
			fail("restore "+strconv.Itoa(n), err)
		}
		if _, err := fetched.Install(ctx); err != nil {
			fail("install", err)
		}
		if _, err := s.Remove(id); err != nil {
			fail("remove", err)
		}
		if _, err := s.GC(ctx, store.GCOptions{MaxBytes: -1}); err != nil {
			fail("gc", err)
		}
	}
}
