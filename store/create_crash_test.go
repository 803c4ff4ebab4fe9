//go:build unix

package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	bolt "go.etcd.io/bbolt"
)

const createCrashEnv = "MUSER_STORE_CREATE_CHILD"

// createChild is the child role of TestCreateCrash: it creates a store
// (as pack import does into a new home) and publishes into it until it is
// killed.
func createChild(dir string) {
	fmt.Println("go")
	s, err := store.Open(dir, store.Options{BlockTokens: 4})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	id := packtest.Identity("create")
	for i := uint64(0); ; i++ {
		toks := packtest.Tokens(i, 8, 100)
		if _, err := s.PublishPrefix(context.Background(), id, salt, toks, storetest.KV(id, salt, toks, 4, 256)); err != nil {
			fmt.Println("publish:", err)
			os.Exit(2)
		}
	}
}

// TestCreateCrash SIGKILLs a process at random instants while it creates
// a new store, 120 times. Afterwards a read-only open either finds no
// store (ErrNotFound: creation never finished) or a sound one, never a
// corrupt ledger; a read-write open then works and verifies clean.
func TestCreateCrash(t *testing.T) {
	if dir := os.Getenv(createCrashEnv); dir != "" {
		createChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	rng := rand.New(rand.NewPCG(2026, 3))
	var missing, sound int
	for i := 0; i < 120; i++ {
		dir := filepath.Join(t.TempDir(), "home")
		cmd := exec.Command(os.Args[0], "-test.run=^TestCreateCrash$", "-test.count=1")
		cmd.Env = append(os.Environ(), createCrashEnv+"="+dir)
		// The creation takes a few milliseconds: kill within them.
		storetest.KillChild(t, cmd, "go", time.Duration(rng.IntN(6000))*time.Microsecond)

		ro, err := store.Open(dir, store.Options{ReadOnly: true})
		switch {
		case errors.Is(err, store.ErrNotFound):
			missing++
		case err != nil:
			t.Fatalf("after kill %d: read-only open: %v; want a store or ErrNotFound", i, err)
		default:
			sound++
			if _, err := ro.Packs(); err != nil {
				t.Errorf("after kill %d: read-only listing: %v", i, err)
			}
			ro.Close()
		}
		s, err := store.Open(dir, store.Options{})
		if err != nil {
			t.Fatalf("after kill %d: read-write open: %v", i, err)
		}
		rep, err := s.Verify(context.Background(), store.VerifyOptions{})
		if err != nil || len(rep.Findings) != 0 {
			t.Errorf("after kill %d: verify: %v %v", i, rep.Findings, err)
		}
		s.Close()
		ro, err = store.Open(dir, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("after kill %d and a read-write open: read-only open: %v", i, err)
		}
		ro.Close()
	}
	t.Logf("120 kills: %d before the store existed, %d after", missing, sound)
}

// TestUninitialisedLedger: a ledger.db without its meta bucket and with
// no packs (what a kill during creation left with earlier builds) is no
// store to a read-only open, and a read-write open initialises it and
// removes temporary ledgers left by killed creators.
func TestUninitialisedLedger(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "ledger.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	leftover := filepath.Join(dir, ".tmp-ledger-123")
	if err := os.WriteFile(leftover, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(dir, store.Options{ReadOnly: true}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("read-only open of an uninitialised ledger: got %v, want ErrNotFound", err)
	}
	s := storetest.Open(t, dir, store.Options{BlockTokens: 4, NoSync: true})
	if s.BlockTokens() != 4 {
		t.Errorf("block size: got %d, want 4", s.BlockTokens())
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("temporary ledger after a read-write open: %v; want it removed", err)
	}
}
