package tier

import (
	"context"
	"sync"
	"time"

	"github.com/muserhq/muser/pack"
)

// IndexEntry describes one manifest of the tier's index.
type IndexEntry struct {
	// Pack is the pack ID.
	Pack pack.Digest
	// Tokens is how many tokens it covers.
	Tokens int
	// Bytes is the size of its chunks (a repeated chunk once per use).
	Bytes uint64
	// Producer is the node that computed the KV.
	Producer string
	// Modified is when the manifest object was written.
	Modified time.Time
}

type keyHit struct {
	pack  pack.Digest
	depth int // blocks through this key
}

// Index is the tier's index of manifests: every manifest object listed,
// read once, authenticated under the tier's key and indexed by its block
// keys, so that a lookup finds the longest prefix of a request the tier
// holds without a request to the bucket. Refresh brings it up to date; it
// is safe for concurrent use.
type Index struct {
	t *Tier

	mu      sync.RWMutex
	entries map[pack.Digest]IndexEntry
	keys    map[pack.Digest]keyHit
	chains  map[pack.Digest][]pack.Digest
	bad     map[string]error // manifest keys that failed to decode or verify
	loaded  time.Time
}

// NewIndex returns an empty index of t.
func NewIndex(t *Tier) *Index {
	return &Index{t: t, entries: map[pack.Digest]IndexEntry{}, keys: map[pack.Digest]keyHit{},
		chains: map[pack.Digest][]pack.Digest{}, bad: map[string]error{}}
}

// RefreshResult says what a refresh found.
type RefreshResult struct {
	// Added and Removed count manifests that appeared and disappeared;
	// Bad those that appeared but failed to decode or verify (each is
	// read once, then ignored until it disappears).
	Added, Removed, Bad int
	// BadErrs holds the new bad manifests' faults.
	BadErrs []error
}

// Refresh lists the manifests and reads those not yet indexed. On an
// error the index keeps what it had.
func (ix *Index) Refresh(ctx context.Context) (RefreshResult, error) {
	var res RefreshResult
	objs, err := ix.t.list(ctx, dirManifests)
	if err != nil {
		return res, err
	}
	present := map[pack.Digest]bool{}
	ix.mu.RLock()
	var todo []object
	for _, o := range objs {
		id, ok := digestName(o.Key, dirManifests)
		if !ok {
			continue
		}
		present[id] = true
		if _, ok := ix.entries[id]; ok {
			continue
		}
		if _, ok := ix.bad[o.Key]; ok {
			continue
		}
		todo = append(todo, o)
	}
	ix.mu.RUnlock()
	for _, o := range todo {
		id, _ := digestName(o.Key, dirManifests)
		b, err := ix.t.get(ctx, o.Key, int64(MaxObjectBytes))
		if err != nil {
			if isNotFound(err) {
				continue
			}
			if _, ok := err.(*ObjectError); !ok {
				return res, err
			}
		}
		var m *pack.Manifest
		if err == nil {
			_, _, m, err = ix.t.decodeManifest(o.Key, id, b)
		}
		ix.mu.Lock()
		if err != nil {
			ix.bad[o.Key] = err
			res.Bad++
			res.BadErrs = append(res.BadErrs, err)
		} else {
			ix.add(id, m, o.Modified)
			res.Added++
		}
		ix.mu.Unlock()
	}
	ix.mu.Lock()
	for id := range ix.entries {
		if !present[id] {
			ix.drop(id)
			res.Removed++
		}
	}
	for k := range ix.bad {
		if id, ok := digestName(k, dirManifests); ok && !present[id] {
			delete(ix.bad, k)
		}
	}
	ix.loaded = ix.t.now()
	ix.mu.Unlock()
	return res, nil
}

// add indexes manifest m of pack id; ix.mu is held.
func (ix *Index) add(id pack.Digest, m *pack.Manifest, modified time.Time) {
	chain := m.BlockKeys()
	ix.entries[id] = IndexEntry{Pack: id, Tokens: len(m.Tokens), Bytes: m.Bytes(), Producer: m.Producer, Modified: modified}
	ix.chains[id] = chain
	for i, k := range chain {
		if h, ok := ix.keys[k]; !ok || h.depth < i+1 || (h.depth == i+1 && ix.entries[h.pack].Tokens < len(m.Tokens)) {
			ix.keys[k] = keyHit{pack: id, depth: i + 1}
		}
	}
}

// drop removes pack id; ix.mu is held. Keys it served are re-pointed at
// another pack holding them.
func (ix *Index) drop(id pack.Digest) {
	chain := ix.chains[id]
	delete(ix.entries, id)
	delete(ix.chains, id)
	for _, k := range chain {
		if ix.keys[k].pack == id {
			delete(ix.keys, k)
		}
	}
	for other, c := range ix.chains {
		for i, k := range c {
			if _, ok := ix.keys[k]; !ok {
				ix.keys[k] = keyHit{pack: other, depth: i + 1}
			}
		}
	}
}

// Lookup returns the pack holding the longest prefix of the block-key
// chain keys and how many blocks of it, or false.
func (ix *Index) Lookup(keys []pack.Digest) (pack.Digest, int, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for d := len(keys); d > 0; d-- {
		if h, ok := ix.keys[keys[d-1]]; ok && h.depth == d {
			return h.pack, d, true
		}
	}
	return pack.Digest{}, 0, false
}

// Entries returns every indexed manifest.
func (ix *Index) Entries() []IndexEntry {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]IndexEntry, 0, len(ix.entries))
	for _, e := range ix.entries {
		out = append(out, e)
	}
	return out
}

// Len returns how many manifests are indexed.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.entries)
}
