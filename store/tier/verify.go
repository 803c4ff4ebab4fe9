package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/muserhq/muser/pack"
)

// Finding is one fault Verify found: the object, the pack it concerns
// (zero for a chunk no manifest names) and the fault.
type Finding struct {
	Key  string
	Pack pack.Digest
	Err  error
}

func (f Finding) Error() string {
	if f.Pack.IsZero() {
		return fmt.Sprintf("%s: %v", f.Key, f.Err)
	}
	return fmt.Sprintf("pack %s: %s: %v", f.Pack.Short(), f.Key, f.Err)
}

// Unwrap returns the fault.
func (f Finding) Unwrap() error { return f.Err }

// VerifyReport is what Verify checked and found.
type VerifyReport struct {
	// Packs and Chunks count the manifests and distinct chunks checked.
	Packs, Chunks int
	// Bytes counts the chunk bytes read.
	Bytes int64
	// Findings lists every fault, manifests first, in key order.
	Findings []Finding
}

// VerifyOptions qualify Verify.
type VerifyOptions struct {
	// Expect, when non-nil, is the identity every manifest must have.
	Expect *pack.Identity
}

// Verify checks the whole tier and reports every fault rather than the
// first: each manifest object's layout, name (it hashes to its pack ID),
// seal under the tier's key and encoding, its Merkle root; and each chunk
// a manifest names: present, of the size the manifest says, and hashing
// to its ID (every chunk is read once). It changes nothing. An error is
// returned only when the tier cannot be listed or read.
func (t *Tier) Verify(ctx context.Context, opts VerifyOptions) (VerifyReport, error) {
	var rep VerifyReport
	objs, err := t.list(ctx, dirManifests)
	if err != nil {
		return rep, err
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	type use struct {
		pack  pack.Digest
		size  uint32
		block int
	}
	chunks := map[pack.Digest][]use{}
	var order []pack.Digest
	for _, o := range objs {
		id, ok := t.digestKey(o.Key, dirManifests)
		if !ok {
			rep.Findings = append(rep.Findings, Finding{Key: o.Key, Err: &ObjectError{Key: o.Key,
				Err: fmt.Errorf("%w: %s", pack.ErrCorrupt, notAPack(o))}})
			continue
		}
		rep.Packs++
		_, _, m, err := t.Manifest(ctx, id)
		if isNotFound(err) {
			rep.Packs-- // deleted since the listing (a gc's eviction)
			continue
		}
		if err == nil && opts.Expect != nil {
			err = opts.Expect.Check(m.Identity)
		}
		if err == nil {
			err = m.CheckRoot()
		}
		if err != nil {
			if isUnavailable(err) {
				return rep, err
			}
			rep.Findings = append(rep.Findings, Finding{Key: o.Key, Pack: id, Err: err})
			continue
		}
		for i, c := range m.Chunks {
			if _, ok := chunks[c.ID]; !ok {
				order = append(order, c.ID)
			}
			chunks[c.ID] = append(chunks[c.ID], use{pack: id, size: c.Size, block: i})
		}
	}
	for _, c := range order {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		rep.Chunks++
		u := chunks[c]
		key := t.chunkKey(c)
		data, err := t.get(ctx, key, int64(u[0].size))
		switch {
		case err != nil && isUnavailable(err):
			return rep, err
		case err != nil && isNotFound(err):
			err = fmt.Errorf("missing: %w", err)
		case err != nil:
		case len(data) != int(u[0].size):
			err = &ObjectError{Key: key, Err: fmt.Errorf("%w: truncated: %d bytes, the manifest says %d", io.ErrUnexpectedEOF, len(data), u[0].size)}
		default:
			rep.Bytes += int64(len(data))
			if got := pack.ChunkID(data); got != c {
				err = &ObjectError{Key: key, Err: &pack.DigestError{Kind: pack.DigestChunk, Object: "tier chunk", Expected: c, Actual: got}}
			}
		}
		if err != nil {
			for _, x := range u {
				rep.Findings = append(rep.Findings, Finding{Key: key, Pack: x.pack, Err: fmt.Errorf("block %d: %w", x.block, err)})
			}
		}
	}
	return rep, nil
}

// isUnavailable reports whether err is the tier failing (not an object
// at fault).
func isUnavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// PackInfo describes one manifest in the tier, for List.
type PackInfo struct {
	// Pack is the pack ID; Key its manifest object.
	Pack pack.Digest `json:"pack"`
	Key  string      `json:"key"`
	// Tokens, Blocks and Bytes describe the pack; IdentityKey is its
	// identity's key, Producer the node that computed it.
	Tokens      int         `json:"tokens"`
	Blocks      int         `json:"blocks"`
	Bytes       uint64      `json:"bytes"`
	IdentityKey pack.Digest `json:"identity_key"`
	Producer    string      `json:"producer"`
	// Uploader is the node that sealed the manifest into the tier.
	Uploader string `json:"uploader"`
	// Modified is when the manifest object was written.
	Modified string `json:"modified"`
	// LastUse is the pack's recency for fleet gc: the later of Modified
	// and the last install of it by any node (its use marker).
	LastUse string `json:"last_use"`
	// Pinned is true when pins/ID exists: fleet gc never evicts it.
	Pinned bool `json:"pinned"`
	// Err, when not empty, says why the manifest does not verify.
	Err string `json:"error,omitempty"`
}

// List describes every manifest in the tier, in key order; one that does
// not verify is listed with Err set.
func (t *Tier) List(ctx context.Context) ([]PackInfo, error) {
	objs, err := t.list(ctx, dirManifests)
	if err != nil {
		return nil, err
	}
	pins, err := t.pins(ctx)
	if err != nil {
		return nil, err
	}
	uses, err := t.uses(ctx)
	if err != nil {
		return nil, err
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	out := make([]PackInfo, 0, len(objs))
	for _, o := range objs {
		id, ok := t.digestKey(o.Key, dirManifests)
		const layout = "2006-01-02T15:04:05Z"
		u, used := uses[id]
		p := PackInfo{Pack: id, Key: o.Key, Modified: o.Modified.UTC().Format(layout),
			LastUse: lastUse(o.Modified, u, used).UTC().Format(layout), Pinned: pins[id]}
		if !ok {
			p.Err = notAPack(o)
			out = append(out, p)
			continue
		}
		seal, _, m, err := t.Manifest(ctx, id)
		if isNotFound(err) {
			continue // deleted since the listing
		}
		if err != nil {
			if isUnavailable(err) {
				return nil, err
			}
			p.Err = err.Error()
		} else {
			p.Tokens, p.Blocks, p.Bytes = len(m.Tokens), len(m.Chunks), m.Bytes()
			p.IdentityKey, p.Producer, p.Uploader = m.Identity.Key(), m.Producer, seal.Producer
		}
		out = append(out, p)
	}
	return out, nil
}

// notAPack says why a listed key under manifests/ is no pack of the tier.
func notAPack(o object) string {
	if o.Dir {
		return "a folder, which the tier's layout does not have (another tier's prefix?)"
	}
	return "not a pack ID"
}
