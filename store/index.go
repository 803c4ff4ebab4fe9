package store

import "github.com/muserhq/muser/pack"

// index is the in-memory radix index over block-key chains. A block key
// names its whole prefix (identity, tenant and every token up to the end of
// its block), so the trie's nodes are found by key in a map and the
// longest cached prefix of a request costs one map lookup per block. Each
// node counts the live packs that pass through it; at most one pack ends at
// a node (one pack per identity, tenant and token list). The index holds
// no quarantined pack. It is rebuilt from the ledger's blocks bucket at
// open; the caller holds Store.mu.
type index struct {
	nodes map[pack.Digest]*node
}

type node struct {
	key      pack.Digest
	parent   *node
	children []*node
	chunk    pack.Digest
	size     uint32
	depth    int // block number, 0 for a first block
	refs     int // live packs whose chain passes through this node
	end      pack.Digest
}

func newIndex() *index { return &index{nodes: make(map[pack.Digest]*node)} }

// add inserts pack id with chain c. The caller has checked that no node of
// the chain holds a different chunk and that no pack ends at its last key.
func (ix *index) add(id pack.Digest, c []chainEntry) {
	var parent *node
	for i, e := range c {
		n := ix.nodes[e.key]
		if n == nil {
			n = &node{key: e.key, parent: parent, chunk: e.chunk, size: e.size, depth: i}
			ix.nodes[e.key] = n
			if parent != nil {
				parent.children = append(parent.children, n)
			}
		}
		n.refs++
		parent = n
	}
	if parent != nil {
		parent.end = id
	}
}

// remove takes pack id with chain c out of the index.
func (ix *index) remove(id pack.Digest, c []chainEntry) {
	for i := len(c) - 1; i >= 0; i-- {
		n := ix.nodes[c[i].key]
		if n == nil {
			continue
		}
		if i == len(c)-1 && n.end == id {
			n.end = pack.Digest{}
		}
		n.refs--
		if n.refs <= 0 {
			delete(ix.nodes, n.key)
			if p := n.parent; p != nil {
				for j, ch := range p.children {
					if ch == n {
						p.children = append(p.children[:j], p.children[j+1:]...)
						break
					}
				}
			}
		}
	}
}

// match returns the deepest node on keys' chain that the index holds and
// its depth in blocks (0 and nil on a miss).
func (ix *index) match(keys []pack.Digest) (int, *node) {
	var last *node
	for i, k := range keys {
		n := ix.nodes[k]
		if n == nil {
			return i, last
		}
		last = n
	}
	return len(keys), last
}

// packThrough returns a live pack whose chain passes through n: the pack
// ending at n if any, else one found by descending through children. Every
// node with refs > 0 has a pack ending at it or below it.
func (ix *index) packThrough(n *node) (pack.Digest, bool) {
	for n != nil {
		if !n.end.IsZero() {
			return n.end, true
		}
		if len(n.children) == 0 {
			return pack.Digest{}, false
		}
		n = n.children[0]
	}
	return pack.Digest{}, false
}

// path returns the nodes from the root of n's chain down to n.
func (ix *index) path(n *node) []*node {
	out := make([]*node, n.depth+1)
	for ; n != nil; n = n.parent {
		if n.depth < len(out) {
			out[n.depth] = n
		}
	}
	return out
}
