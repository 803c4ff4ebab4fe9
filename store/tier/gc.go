package tier

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/muserhq/muser/pack"
)

// NoBudget is GCOptions.MaxBytes for a gc that evicts nothing and only
// sweeps.
const NoBudget = -1

// GCOptions qualify GC.
type GCOptions struct {
	// MaxBytes is the byte budget of the tier's chunks: unpinned packs
	// are evicted, least recently used first (docs/tier.md, "Eviction"),
	// until the chunks the remaining packs name fit it. As in the local
	// store's gc, a negative budget means none and zero evicts every
	// unpinned pack; the zero GCOptions therefore has a budget of zero,
	// and callers that only sweep set NoBudget (-1).
	MaxBytes int64
	// Grace is how old an unreferenced chunk (or a manifest that does
	// not verify) must be before it is deleted; at least MinGrace
	// (rule G3). Zero means MinGrace.
	Grace time.Duration
	// DryRun reports what would be done without deleting anything.
	DryRun bool
}

// GCReport says what GC found and did.
type GCReport struct {
	// Packs and Chunks count the manifests and chunk objects found;
	// Bytes the chunk bytes.
	Packs, Chunks int
	Bytes         int64
	// Strays counts the objects under chunks/ whose keys are not chunk
	// keys (not exactly chunks/HEX: a README, another tool's temporary
	// file): no chunks of the layout, so gc neither counts them in
	// Chunks and Bytes nor deletes them.
	Strays int
	// Pinned counts the packs kept because pins/ID exists.
	Pinned int
	// Evicted lists the packs whose manifests were deleted (or would
	// be, with DryRun) to meet the budget.
	Evicted []pack.Digest
	// BadManifests counts manifest objects that do not verify and were
	// deleted (older than the grace period) or kept (younger).
	BadManifests int
	// DeletedChunks and DeletedBytes count the unreferenced chunks
	// deleted; Young counts unreferenced chunks younger than the grace
	// period, kept for a later run.
	DeletedChunks int
	DeletedBytes  int64
	Young         int
	// StaleUses counts use markers deleted because their pack's
	// manifest is gone (evicted now, or earlier and older than the grace
	// period).
	StaleUses int
	// Stopped is true when the run reached MaxGCTime and deleted nothing
	// more (rule G4).
	Stopped bool
}

// GC keeps the tier within a byte budget and deletes what no pack needs,
// safely against uploads running on other nodes (docs/tier.md,
// "Consistency and gc"): it marks from the manifests (every chunk a
// verified manifest names is live), evicts unpinned packs least recently
// used first (the later of the manifest's upload and the pack's use
// marker, uses/ID) while over budget by deleting their manifests, and
// sweeps a chunk only when no remaining manifest names it and its
// last-modified time, checked again just before the delete, is older
// than the grace period (G1–G4 make that safe: an uploader refreshes any
// chunk it relies on that is older than RefreshAge). Manifests that do
// not verify name nothing and are deleted after the grace period; so are
// use markers of packs not in the tier (at once for a pack it evicted).
// Objects under chunks/ whose keys are not chunk keys (chunks/HEX) are
// not the layout's: they are counted in GCReport.Strays and never
// deleted.
func (t *Tier) GC(ctx context.Context, opts GCOptions) (GCReport, error) {
	var rep GCReport
	if opts.Grace == 0 {
		opts.Grace = MinGrace
	}
	if opts.Grace < MinGrace {
		return rep, fmt.Errorf("%w: gc grace %v is shorter than the tier's minimum, %v", pack.ErrInvalid, opts.Grace, MinGrace)
	}
	start := t.now()
	mobjs, err := t.list(ctx, dirManifests)
	if err != nil {
		return rep, err
	}
	pins, err := t.pins(ctx)
	if err != nil {
		return rep, err
	}
	uses, err := t.uses(ctx)
	if err != nil {
		return rep, err
	}
	type live struct {
		id       pack.Digest
		key      string
		modified time.Time
		created  time.Time
		chunks   []pack.Digest
	}
	var packs []live
	refs := map[pack.Digest]int{}
	var badKeys []object
	// unsealed counts the manifest objects named by pack IDs that do not
	// verify; keys under manifests/ that are no pack IDs (a README) are
	// no manifests and say nothing about the key.
	unsealed := 0
	for _, o := range mobjs {
		if o.Dir {
			continue // another tier's, or nobody's: never this gc's
		}
		id, ok := t.digestKey(o.Key, dirManifests)
		var m *pack.Manifest
		if ok {
			_, _, m, err = t.Manifest(ctx, id)
			switch {
			case isNotFound(err):
				continue // deleted since the listing
			case isUnavailable(err):
				return rep, err
			}
		}
		if !ok || err != nil {
			rep.BadManifests++
			badKeys = append(badKeys, o)
			if ok {
				unsealed++
			}
			continue
		}
		rep.Packs++
		u, used := uses[id]
		l := live{id: id, key: o.Key, modified: lastUse(o.Modified, u, used), created: m.Created}
		seen := map[pack.Digest]bool{}
		for _, c := range m.Chunks {
			if !seen[c.ID] {
				seen[c.ID] = true
				l.chunks = append(l.chunks, c.ID)
				refs[c.ID]++
			}
		}
		packs = append(packs, l)
	}
	if rep.Packs == 0 && unsealed > 0 {
		// Likely the wrong key: sweeping now would delete every chunk.
		return rep, fmt.Errorf("%w: none of the tier's %d manifests verifies under this key (the wrong cluster or --tier-key?); gc deletes nothing", ErrWrongKey, unsealed)
	}
	cobjs, err := t.list(ctx, dirChunks)
	if err != nil {
		return rep, err
	}
	// Only chunks/HEX is a chunk (docs/tier.md, "Objects"): other keys
	// under chunks/ are not the layout's, and gc leaves them alone.
	type chunkObject struct {
		object
		id pack.Digest
	}
	var chunks []chunkObject
	size := map[pack.Digest]int64{}
	for _, o := range cobjs {
		if o.Dir {
			continue // another tier's, or nobody's: never this gc's
		}
		id, ok := t.digestKey(o.Key, dirChunks)
		if !ok {
			rep.Strays++
			continue
		}
		rep.Chunks++
		rep.Bytes += o.Size
		size[id] = o.Size
		chunks = append(chunks, chunkObject{object: o, id: id})
	}
	// Evict, least recently used first, until the live chunks fit the
	// budget.
	evicted := map[pack.Digest]bool{}
	if opts.MaxBytes >= 0 {
		var liveBytes int64
		for id := range refs {
			liveBytes += size[id]
		}
		// Object times have a resolution of a second on many servers:
		// ties go by the packs' creation times.
		sort.Slice(packs, func(i, j int) bool {
			if !packs[i].modified.Equal(packs[j].modified) {
				return packs[i].modified.Before(packs[j].modified)
			}
			return packs[i].created.Before(packs[j].created)
		})
		for _, p := range packs {
			if pins[p.id] {
				rep.Pinned++
				continue
			}
			if liveBytes <= opts.MaxBytes {
				continue
			}
			// Rule G4: past MaxGCTime the listing is too old to act on.
			if t.now().Sub(start) > MaxGCTime {
				rep.Stopped = true
				return rep, nil
			}
			if !opts.DryRun {
				if err := t.remove(ctx, p.key); err != nil {
					return rep, err
				}
			}
			rep.Evicted = append(rep.Evicted, p.id)
			evicted[p.id] = true
			for _, c := range p.chunks {
				if refs[c]--; refs[c] == 0 {
					delete(refs, c)
					liveBytes -= size[c]
				}
			}
		}
	} else {
		for _, p := range packs {
			if pins[p.id] {
				rep.Pinned++
			}
		}
	}
	// Sweep.
	old := func(m time.Time) bool { return t.now().Sub(m) >= opts.Grace }
	// Use markers only order eviction: one whose pack was just evicted
	// goes now, one whose manifest is gone otherwise once it is older
	// than the grace period (an upload of the pack may be under way).
	verified := map[pack.Digest]bool{}
	for _, p := range packs {
		verified[p.id] = !evicted[p.id]
	}
	for id, u := range uses {
		if verified[id] || (!evicted[id] && !old(u.Modified)) {
			continue
		}
		if t.now().Sub(start) > MaxGCTime {
			rep.Stopped = true
			return rep, nil
		}
		if !opts.DryRun {
			if err := t.remove(ctx, u.Key); err != nil {
				return rep, err
			}
		}
		rep.StaleUses++
	}
	for _, o := range badKeys {
		if t.now().Sub(start) > MaxGCTime {
			rep.Stopped = true
			return rep, nil
		}
		if !old(o.Modified) || opts.DryRun {
			continue
		}
		// Rule G4, as for chunks: the key may hold another object since
		// the listing (another gc deleted the bad one, an uploader put
		// the pack's manifest there): delete only the one judged bad.
		cur, gone, err := t.restat(ctx, o.Key)
		if err != nil {
			return rep, err
		}
		if gone || cur.ETag != o.ETag || cur.Size != o.Size || !cur.Modified.Equal(o.Modified) || !old(cur.Modified) {
			continue
		}
		if err := t.remove(ctx, o.Key); err != nil {
			return rep, err
		}
	}
	for _, o := range chunks {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if t.now().Sub(start) > MaxGCTime {
			rep.Stopped = true
			return rep, nil
		}
		if refs[o.id] > 0 {
			continue
		}
		if !old(o.Modified) {
			rep.Young++
			continue
		}
		// Rule G4: check the time again just before deleting; an
		// uploader may have refreshed the chunk since the listing.
		cur, gone, err := t.restat(ctx, o.Key)
		if err != nil {
			return rep, err
		}
		if gone {
			continue
		}
		if !old(cur.Modified) {
			rep.Young++
			continue
		}
		if !opts.DryRun {
			if err := t.remove(ctx, o.Key); err != nil {
				return rep, err
			}
		}
		rep.DeletedChunks++
		rep.DeletedBytes += cur.Size
	}
	return rep, nil
}

// restat reads an object's size, time and ETag again just before gc
// deletes it (rule G4); gone reports one deleted since the listing.
func (t *Tier) restat(ctx context.Context, key string) (cur object, gone bool, err error) {
	cur, err = t.stat(ctx, key)
	if isNotFound(err) {
		return object{}, true, nil
	}
	return cur, false, err
}
