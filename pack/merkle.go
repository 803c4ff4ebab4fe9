package pack

import "github.com/zeebo/blake3"

// MerkleRoot returns the Merkle root over an ordered list of chunk IDs
// (docs/kvpack.md, "Merkle root"). The tree has the shape of RFC 6962's:
// a list of n > 1 entries splits at k, the largest power of two below n,
// into [0,k) and [k,n). A leaf is DK(leaf)(chunkID), an inner node
// DK(node)(left ‖ right); the distinct contexts separate leaves from inner
// nodes, and the split rule makes every count, odd or even, one tree.
// The root of an empty list is the zero digest (no pack has one).
func MerkleRoot(ids []Digest) Digest {
	if len(ids) == 0 {
		return Digest{}
	}
	m := merkler{leaf: hLeaf.Clone(), node: hNode.Clone()}
	return m.root(ids)
}

type merkler struct{ leaf, node *blake3.Hasher }

func (m *merkler) root(ids []Digest) Digest {
	if len(ids) == 1 {
		return m.hash(m.leaf, ids[0][:], nil)
	}
	k := 1
	for k*2 < len(ids) {
		k *= 2
	}
	l, r := m.root(ids[:k]), m.root(ids[k:])
	return m.hash(m.node, l[:], r[:])
}

func (m *merkler) hash(h *blake3.Hasher, a, b []byte) Digest {
	h.Reset()
	_, _ = h.Write(a)
	_, _ = h.Write(b)
	var d Digest
	h.Sum(d[:0])
	return d
}
