package store_test

import (
	"context"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

// fakeClock is a clock that advances one millisecond per reading, so that
// every use has a distinct time and LRU order is exact.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// TestGCProperty: after random publishes (sharing prefixes), restores and
// pins, gc with a random budget leaves the store at or under the budget
// (unless only pinned packs remain), evicts unpinned packs strictly least
// recently used first, never evicts a pinned pack, and never deletes a
// chunk a surviving pack needs (every survivor restores in full, and the
// cleanup's full check passes).
func TestGCProperty(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run("", func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			s := storetest.Open(t, "", store.Options{BlockTokens: 2, Now: clock.Now, OrphanGrace: -1, NoSync: true})
			id := packtest.Identity("gc")
			systems := [][]int32{packtest.Tokens(seed, 6, 50), packtest.Tokens(seed+100, 4, 50)}
			var prompts [][]int32
			for i := 0; i < 30; i++ {
				p := append([]int32{}, systems[rng.IntN(2)]...)
				p = append(p, packtest.Tokens(seed*1000+uint64(i), 2*rng.IntN(6), 50)...)
				if len(p) == 0 {
					continue
				}
				prompts = append(prompts, p)
				storetest.Publish(t, s, id, salt, p, 16+rng.IntN(3)*8)
				if rng.IntN(3) == 0 {
					q := prompts[rng.IntN(len(prompts))]
					if _, _, err := storetest.Restore(t, s, id, salt, q); err != nil {
						t.Fatal(err)
					}
				}
			}
			before, _ := s.Packs()
			pinned := map[pack.Digest]bool{}
			for _, p := range before {
				if rng.IntN(6) == 0 {
					if err := s.Pin(p.ID); err != nil {
						t.Fatal(err)
					}
					pinned[p.ID] = true
				}
			}
			st, _ := s.Stats()
			budget := rng.Int64N(st.Bytes + 1)
			rep, err := s.GC(context.Background(), store.GCOptions{MaxBytes: budget})
			if err != nil {
				t.Fatal(err)
			}
			after, _ := s.Packs()
			st2, _ := s.Stats()
			if rep.After != st2.Bytes {
				t.Errorf("report says %d bytes after, stats %d", rep.After, st2.Bytes)
			}
			survivors := map[pack.Digest]store.PackInfo{}
			for _, p := range after {
				survivors[p.ID] = p
			}
			if st2.Bytes > budget {
				for _, p := range after {
					if !p.Pinned {
						t.Fatalf("over budget (%d > %d) with unpinned pack %s left", st2.Bytes, budget, p.ID.Short())
					}
				}
				if !rep.OverBudget {
					t.Error("over budget but the report does not say so")
				}
			}
			var evicted, kept []store.PackInfo
			for _, p := range before {
				_, ok := survivors[p.ID]
				switch {
				case !ok && pinned[p.ID]:
					t.Fatalf("pinned pack %s evicted", p.ID.Short())
				case !ok:
					evicted = append(evicted, p)
				case !pinned[p.ID]:
					kept = append(kept, p)
				}
			}
			if len(evicted) != len(rep.Removed.Packs) {
				t.Errorf("report lists %d removed packs, %d are gone", len(rep.Removed.Packs), len(evicted))
			}
			for _, e := range evicted {
				for _, k := range kept {
					if !e.LastUse.Before(k.LastUse) {
						t.Fatalf("evicted %s (last use %v) but kept less recently used %s (%v)", e.ID.Short(), e.LastUse, k.ID.Short(), k.LastUse)
					}
				}
			}
			sort.Slice(after, func(i, j int) bool { return after[i].Tokens < after[j].Tokens })
			for _, p := range after {
				n, err := s.RestorePack(context.Background(), store.RestoreRequest{Pack: p.ID, Identity: id}, func(int, []byte) error { return nil })
				if err != nil || n != p.Tokens {
					t.Fatalf("survivor %s: restored %d of %d tokens: %v", p.ID.Short(), n, p.Tokens, err)
				}
			}
			// A second run with the same budget has nothing to do.
			rep2, err := s.GC(context.Background(), store.GCOptions{MaxBytes: budget})
			if err != nil || len(rep2.Removed.Packs) != 0 || rep2.Orphans != 0 {
				t.Fatalf("second gc: got %+v, %v; want nothing removed", rep2, err)
			}
		})
	}
}

func TestGCDryRun(t *testing.T) {
	s := storetest.Open(t, "", store.Options{BlockTokens: 2})
	id := packtest.Identity("dry")
	for i := uint64(0); i < 5; i++ {
		storetest.Publish(t, s, id, salt, packtest.Tokens(i, 8, 100), 32)
	}
	st, _ := s.Stats()
	rep, err := s.GC(context.Background(), store.GCOptions{MaxBytes: st.Bytes / 2, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	st2, _ := s.Stats()
	if st2 != st || len(rep.Removed.Packs) == 0 || rep.After > st.Bytes/2 {
		t.Fatalf("dry run: stats %+v -> %+v, report %+v; want no change and a plan under budget", st, st2, rep)
	}
	real, err := s.GC(context.Background(), store.GCOptions{MaxBytes: st.Bytes / 2})
	if err != nil || len(real.Removed.Packs) != len(rep.Removed.Packs) || real.After != rep.After {
		t.Fatalf("real run differs from the dry run: %+v vs %+v (%v)", real, rep, err)
	}
}
