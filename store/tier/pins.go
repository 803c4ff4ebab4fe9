package tier

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// Pin marks pack id pinned (pins/ID): fleet gc never evicts it.
func (t *Tier) Pin(ctx context.Context, id pack.Digest) error {
	_, err := t.put(ctx, t.cfg.Location.key(dirPins+id.String()), nil, false)
	return err
}

// Unpin deletes pack id's pin, if any: fleet gc may evict it again.
func (t *Tier) Unpin(ctx context.Context, id pack.Digest) error {
	return t.remove(ctx, t.cfg.Location.key(dirPins+id.String()))
}

// PinResult says what PinPack did.
type PinResult struct {
	// Pack is the pack named.
	Pack pack.Digest `json:"pack"`
	// Pinned is the pack's state now; Was its state before.
	Pinned bool `json:"pinned"`
	Was    bool `json:"was_pinned"`
}

// PinPack pins (pin true) or unpins the pack whose ID starts with prefix
// (1 to 64 hex digits). A pin needs the pack's manifest in the tier and
// verifying under the tier's key; an unpin also finds a pin whose
// manifest is gone. A prefix that matches nothing wraps ErrNotFound and
// store.ErrNotFound, one that matches several store.ErrAmbiguousID, one
// that is not hex pack.ErrInvalid.
func (t *Tier) PinPack(ctx context.Context, prefix string, pin bool) (PinResult, error) {
	dirs := []string{dirManifests}
	if !pin {
		dirs = append(dirs, dirPins)
	}
	id, err := t.resolve(ctx, prefix, dirs...)
	if err != nil {
		return PinResult{}, err
	}
	res := PinResult{Pack: id, Pinned: pin}
	if pin {
		if _, _, _, err := t.Manifest(ctx, id); err != nil {
			return res, fmt.Errorf("pack %s: %w", id.Short(), err)
		}
	}
	if _, err := t.stat(ctx, t.cfg.Location.key(dirPins+id.String())); err == nil {
		res.Was = true
	} else if !isNotFound(err) {
		return res, err
	}
	if pin {
		err = t.Pin(ctx, id)
	} else {
		err = t.Unpin(ctx, id)
	}
	return res, err
}

// resolve finds the one pack ID that starts with prefix among the
// objects named by pack IDs under dirs.
func (t *Tier) resolve(ctx context.Context, prefix string, dirs ...string) (pack.Digest, error) {
	p := strings.ToLower(prefix)
	if p == "" || len(p) > 64 || strings.Trim(p, "0123456789abcdef") != "" {
		return pack.Digest{}, fmt.Errorf("%w: pack ID %q: want 1 to 64 hex digits", pack.ErrInvalid, prefix)
	}
	hits := map[pack.Digest]bool{}
	for _, d := range dirs {
		objs, err := t.list(ctx, d+p)
		if err != nil {
			return pack.Digest{}, err
		}
		for _, o := range objs {
			if id, ok := t.digestKey(o.Key, d); ok {
				hits[id] = true
			}
		}
	}
	var names []string
	var id pack.Digest
	for h := range hits {
		id = h
		names = append(names, h.Short())
	}
	switch len(hits) {
	case 0:
		return id, fmt.Errorf("pack %q in %s: %w (%w)", prefix, t, ErrNotFound, store.ErrNotFound)
	case 1:
		return id, nil
	}
	return pack.Digest{}, fmt.Errorf("pack %q in %s matches %s: %w", prefix, t, strings.Join(names, ", "), store.ErrAmbiguousID)
}

// pins returns the pinned pack IDs.
func (t *Tier) pins(ctx context.Context) (map[pack.Digest]bool, error) {
	objs, err := t.list(ctx, dirPins)
	if err != nil {
		return nil, err
	}
	out := map[pack.Digest]bool{}
	for _, o := range objs {
		if id, ok := t.digestKey(o.Key, dirPins); ok {
			out[id] = true
		}
	}
	return out, nil
}

// useKey is pack id's use marker.
func (t *Tier) useKey(id pack.Digest) string { return t.cfg.Location.key(dirUses + id.String()) }

// Touch records a use of pack id (docs/tier.md, "Eviction"): an empty
// object uses/ID, put unconditionally, whose last-modified time the
// server sets. Install calls it after a pack is published locally, and
// Upload when it finds the pack already in the tier. Writers race
// harmlessly: every put says "used now".
func (t *Tier) Touch(ctx context.Context, id pack.Digest) error {
	_, err := t.put(ctx, t.useKey(id), nil, false)
	return err
}

// uses returns the last-use time of every pack with a use marker, and
// the markers' objects.
func (t *Tier) uses(ctx context.Context) (map[pack.Digest]object, error) {
	objs, err := t.list(ctx, dirUses)
	if err != nil {
		return nil, err
	}
	out := map[pack.Digest]object{}
	for _, o := range objs {
		if id, ok := t.digestKey(o.Key, dirUses); ok {
			out[id] = o
		}
	}
	return out, nil
}

// lastUse is a pack's recency for eviction: the later of its manifest's
// upload and its use marker.
func lastUse(uploaded time.Time, use object, ok bool) time.Time {
	if ok && use.Modified.After(uploaded) {
		return use.Modified
	}
	return uploaded
}
