package pack_test

import (
	"fmt"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/zeebo/blake3"
)

// refRoot is an independent statement of docs/kvpack.md's Merkle rule,
// written bottom-up over explicit levels rather than by recursion.
func refRoot(ids []pack.Digest) pack.Digest {
	leaf := func(d pack.Digest) pack.Digest {
		var out pack.Digest
		blake3.DeriveKey("muser kvpack v1 merkle leaf", d[:], out[:])
		return out
	}
	node := func(l, r pack.Digest) pack.Digest {
		var out pack.Digest
		blake3.DeriveKey("muser kvpack v1 merkle node", append(l[:], r[:]...), out[:])
		return out
	}
	var rec func(lo, hi int) pack.Digest
	rec = func(lo, hi int) pack.Digest {
		if hi-lo == 1 {
			return leaf(ids[lo])
		}
		k := 1
		for k < hi-lo {
			k <<= 1
		}
		k >>= 1
		return node(rec(lo, lo+k), rec(lo+k, hi))
	}
	return rec(0, len(ids))
}

func TestMerkleRoot(t *testing.T) {
	if !pack.MerkleRoot(nil).IsZero() {
		t.Fatal("root of nothing is not zero")
	}
	var ids []pack.Digest
	roots := map[pack.Digest]int{}
	for n := 1; n <= 33; n++ {
		ids = append(ids, packtest.Digest(fmt.Sprint(n)))
		got := pack.MerkleRoot(ids)
		if want := refRoot(ids); got != want {
			t.Fatalf("n=%d: got %s, want %s", n, got, want)
		}
		if prev, ok := roots[got]; ok {
			t.Fatalf("n=%d has the root of n=%d", n, prev)
		}
		roots[got] = n
	}
	// One leaf's root is not the chunk ID itself, and order matters.
	if pack.MerkleRoot(ids[:1]) == ids[0] {
		t.Fatal("leaf is not domain-separated from its chunk ID")
	}
	if pack.MerkleRoot([]pack.Digest{ids[0], ids[1]}) == pack.MerkleRoot([]pack.Digest{ids[1], ids[0]}) {
		t.Fatal("root ignores order")
	}
	// An inner node cannot pose as a list of two leaves: a two-leaf tree's
	// root differs from the one-leaf tree whose chunk ID is that node.
	two := pack.MerkleRoot(ids[:2])
	if pack.MerkleRoot([]pack.Digest{two}) == two {
		t.Fatal("node and leaf contexts collide")
	}
}
