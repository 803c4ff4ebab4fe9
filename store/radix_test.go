package store_test

import (
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

type published struct {
	id     pack.Identity
	salt   string
	tokens []int32
	pack   pack.Digest
}

// bruteMatch is the reference: the longest block-aligned common prefix of
// the query with any live pack of the same identity and tenant.
func bruteMatch(live []published, id pack.Identity, salt string, q []int32, block int) int {
	best := 0
	for _, p := range live {
		if p.id != id || p.salt != salt {
			continue
		}
		n := 0
		for n < len(q) && n < len(p.tokens) && q[n] == p.tokens[n] {
			n++
		}
		if n -= n % block; n > best {
			best = n
		}
	}
	return best
}

// TestRadixAgainstBruteForce: on random token streams over a tiny
// vocabulary (so prefixes are shared a lot), Match agrees with the brute
// force reference for every query, before and after removals, and after
// the index is rebuilt from the ledger.
func TestRadixAgainstBruteForce(t *testing.T) {
	const block = 2
	rng := rand.New(rand.NewPCG(7, 7))
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{BlockTokens: block, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ids := []pack.Identity{packtest.Identity("r1"), packtest.Identity("r2")}
	salts := []string{"a", "b"}
	stream := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(rng.IntN(3))
		}
		return out
	}
	var live []published
	for i := 0; i < 150; i++ {
		p := published{id: ids[rng.IntN(2)], salt: salts[rng.IntN(2)], tokens: stream(block * (1 + rng.IntN(8)))}
		p.pack = storetest.Publish(t, s, p.id, []byte(p.salt), p.tokens, 8).Pack
		dup := false
		for _, q := range live {
			dup = dup || q.pack == p.pack
		}
		if !dup {
			live = append(live, p)
		}
	}
	check := func(stage string) {
		t.Helper()
		for i := 0; i < 400; i++ {
			id, sl := ids[rng.IntN(2)], salts[rng.IntN(2)]
			q := stream(rng.IntN(20))
			if rng.IntN(2) == 0 && len(live) > 0 {
				// Start from a live pack's tokens and mutate the tail.
				base := live[rng.IntN(len(live))].tokens
				q = append(append([]int32{}, base[:rng.IntN(len(base)+1)]...), stream(rng.IntN(6))...)
			}
			m, err := s.Match(id, []byte(sl), q)
			if err != nil {
				t.Fatal(err)
			}
			if want := bruteMatch(live, id, sl, q, block); m.Tokens != want {
				t.Fatalf("%s: query %v (%s, %s): got %d tokens, want %d", stage, q, id.Engine, sl, m.Tokens, want)
			}
			if m.Tokens > 0 {
				info, err := s.Pack(m.Pack)
				if err != nil || info.Tokens < m.Tokens {
					t.Fatalf("%s: match names pack %s covering %d tokens (%v), want >= %d", stage, m.Pack.Short(), info.Tokens, err, m.Tokens)
				}
			}
		}
	}
	check("fresh")
	rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	var gone []pack.Digest
	for _, p := range live[:len(live)/3] {
		gone = append(gone, p.pack)
	}
	if _, err := s.Remove(gone...); err != nil {
		t.Fatal(err)
	}
	live = live[len(live)/3:]
	check("after removals")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = storetest.Open(t, dir, store.Options{})
	check("after reopen")
}
