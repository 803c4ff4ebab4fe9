package tier

import (
	"context"
	"errors"
	"sync"

	"github.com/muserhq/muser/pack"
)

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

	mu     sync.RWMutex
	tokens map[pack.Digest]int // each indexed pack's token count
	keys   map[pack.Digest]keyHit
	chains map[pack.Digest][]pack.Digest
	bad    map[string]object // manifest objects that failed to decode or verify, by key
}

// NewIndex returns an empty index of t.
func NewIndex(t *Tier) *Index {
	return &Index{t: t, tokens: map[pack.Digest]int{}, keys: map[pack.Digest]keyHit{},
		chains: map[pack.Digest][]pack.Digest{}, bad: map[string]object{}}
}

// RefreshResult says what a refresh found.
type RefreshResult struct {
	// Added and Removed count manifests that appeared and disappeared;
	// Bad those that appeared but failed to decode or verify (each is
	// read once, then ignored until it disappears or changes: another
	// ETag, size or time).
	Added, Removed, Bad int
	// BadErrs holds the new bad manifests' faults.
	BadErrs []error
	// Unreadable counts the manifests listed whose GET failed (the
	// bucket refused it or broke off); each is read again at the next
	// refresh, and none holds up the others. UnreadableErrs holds the
	// failures.
	Unreadable     int
	UnreadableErrs []error
}

// sameObject reports whether two listings of a key show the same object.
func sameObject(a, b object) bool {
	return a.ETag == b.ETag && a.Size == b.Size && a.Modified.Equal(b.Modified)
}

// Refresh lists the manifests and reads those not yet indexed. A
// manifest object that cannot be read is counted in Unreadable and
// skipped until the next refresh. When the listing fails, or ctx ends,
// it returns the error and the index keeps what it had (and what it
// read so far).
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
		id, ok := ix.t.digestKey(o.Key, dirManifests)
		if !ok {
			continue
		}
		present[id] = true
		if _, ok := ix.tokens[id]; ok {
			continue
		}
		if b, ok := ix.bad[o.Key]; ok && sameObject(b, o) {
			continue
		}
		todo = append(todo, o)
	}
	ix.mu.RUnlock()
	for _, o := range todo {
		id, _ := ix.t.digestKey(o.Key, dirManifests)
		b, err := ix.t.get(ctx, o.Key, int64(MaxObjectBytes))
		if err != nil {
			if isNotFound(err) {
				continue
			}
			var oe *ObjectError
			if !errors.As(err, &oe) {
				if ctx.Err() != nil {
					return res, err
				}
				// This object, not the listing: the others are
				// read, and it is tried again at the next refresh.
				res.Unreadable++
				res.UnreadableErrs = append(res.UnreadableErrs, err)
				continue
			}
		}
		var m *pack.Manifest
		if err == nil {
			_, _, m, err = ix.t.decodeManifest(o.Key, id, b)
		}
		ix.mu.Lock()
		if err != nil {
			ix.bad[o.Key] = o
			res.Bad++
			res.BadErrs = append(res.BadErrs, err)
		} else {
			delete(ix.bad, o.Key)
			ix.add(id, m)
			res.Added++
		}
		ix.mu.Unlock()
	}
	ix.mu.Lock()
	for id := range ix.tokens {
		if !present[id] {
			ix.drop(id)
			res.Removed++
		}
	}
	if res.Removed > 0 {
		ix.repoint()
	}
	for k := range ix.bad {
		if id, ok := ix.t.digestKey(k, dirManifests); ok && !present[id] {
			delete(ix.bad, k)
		}
	}
	ix.mu.Unlock()
	return res, nil
}

// add indexes manifest m of pack id; ix.mu is held.
func (ix *Index) add(id pack.Digest, m *pack.Manifest) {
	chain := m.BlockKeys()
	ix.tokens[id] = len(m.Tokens)
	ix.chains[id] = chain
	for i, k := range chain {
		if h, ok := ix.keys[k]; !ok || h.depth < i+1 || (h.depth == i+1 && ix.tokens[h.pack] < len(m.Tokens)) {
			ix.keys[k] = keyHit{pack: id, depth: i + 1}
		}
	}
}

// drop removes pack id; ix.mu is held. The keys it served are left
// unserved until repoint.
func (ix *Index) drop(id pack.Digest) {
	chain := ix.chains[id]
	delete(ix.tokens, id)
	delete(ix.chains, id)
	for _, k := range chain {
		if ix.keys[k].pack == id {
			delete(ix.keys, k)
		}
	}
}

// repoint points every key no pack serves at a remaining pack holding it
// (once per refresh, after its drops); ix.mu is held.
func (ix *Index) repoint() {
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

// Len returns how many manifests are indexed.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.tokens)
}
