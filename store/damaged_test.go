package store_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

// TestDamagedLedger damages random bytes of the bbolt ledger file, 150
// times: Open, Packs, Stats and a whole-store Verify must each return
// (an error or a result) and never crash the process, although bbolt
// maps the file and trusts its page structure.
func TestDamagedLedger(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{BlockTokens: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < 20; i++ {
		storetest.Publish(t, s, packtest.Identity("l"), nil, packtest.Tokens(i, 16, 100), 32)
	}
	s.Close()
	path := filepath.Join(dir, "ledger.db")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	opened, refused := 0, 0
	for i := 0; i < 150; i++ {
		b := append([]byte(nil), orig...)
		for j := 0; j < 4; j++ {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := store.Open(dir, store.Options{})
		if err != nil {
			refused++
			continue
		}
		opened++
		_, _ = s.Packs()
		_, _ = s.Stats()
		_, _ = s.Verify(context.Background(), store.VerifyOptions{NoData: true})
		s.Close()
	}
	t.Logf("%d damaged ledgers opened, %d refused at open", opened, refused)
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	storetest.CheckDir(t, dir, store.Options{})
}
