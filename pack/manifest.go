package pack

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Manifest layout constants (docs/kvpack.md, "Manifest encoding").
const (
	// ManifestMagic opens every encoded manifest.
	ManifestMagic = "KVPM"
	// MaxProducer is the longest producer name, in bytes.
	MaxProducer = 255
	// MaxManifestBytes bounds an encoded manifest: the fixed fields plus
	// the largest identity, token list and chunk list the limits allow.
	MaxManifestBytes = 4 + 4 + 4 + MaxIdentityBytes + 32 + 4 + 4 + 4*MaxTokens + (32+4)*MaxTokens + 32 + 2 + MaxProducer + 8 + 8
)

// ChunkRef names one chunk of a pack: its ID and its size in bytes.
type ChunkRef struct {
	ID   Digest `json:"id"`
	Size uint32 `json:"size"`
}

// Manifest is the immutable description of a pack: which identity and
// tenant its KV belongs to, which tokens it covers, and which chunks hold
// the KV of each block, sealed by a Merkle root over the chunk IDs. Its
// canonical encoding (Marshal) is hashed into the pack ID.
type Manifest struct {
	// Identity is the engine state the KV belongs to.
	Identity Identity
	// BlockTokens is the number of tokens per block.
	BlockTokens int
	// Tenant is TenantTag of the tenant salt the pack was published under.
	Tenant Digest
	// Tokens are the tokens covered, len(Chunks)*BlockTokens of them.
	Tokens []int32
	// Chunks holds one chunk per block, in block order. The same chunk may
	// appear more than once.
	Chunks []ChunkRef
	// Root is MerkleRoot of the chunk IDs.
	Root Digest
	// Producer names the node that computed the KV.
	Producer string
	// Generation is the producer's publish counter when it made the pack.
	Generation uint64
	// Created is when the producer made the pack (nanosecond precision,
	// after 1970).
	Created time.Time
}

// ChunkIDs returns the IDs of m's chunks in block order.
func (m *Manifest) ChunkIDs() []Digest {
	ids := make([]Digest, len(m.Chunks))
	for i, c := range m.Chunks {
		ids[i] = c.ID
	}
	return ids
}

// Bytes returns the total size of m's chunks, counting a repeated chunk
// once per reference.
func (m *Manifest) Bytes() uint64 {
	var n uint64
	for _, c := range m.Chunks {
		n += uint64(c.Size)
	}
	return n
}

// BlockKeys returns the block-key chain of m's tokens.
func (m *Manifest) BlockKeys() []Digest {
	return BlockKeys(m.Identity.Key(), m.Tenant, m.Tokens, m.BlockTokens)
}

// Validate checks every rule docs/kvpack.md sets for a manifest except the
// Merkle root: identity, block size, token count and values, chunk count
// and sizes, producer and creation time. Errors wrap ErrInvalid.
func (m *Manifest) Validate() error {
	if err := m.Identity.Validate(); err != nil {
		return err
	}
	if err := CheckTokens(m.Tokens, m.BlockTokens); err != nil {
		return err
	}
	if len(m.Chunks) != len(m.Tokens)/m.BlockTokens {
		return fmt.Errorf("%w: %d chunks for %d blocks", ErrInvalid, len(m.Chunks), len(m.Tokens)/m.BlockTokens)
	}
	for i, c := range m.Chunks {
		if c.Size == 0 || c.Size > MaxChunkBytes {
			return fmt.Errorf("%w: chunk %d size %d is outside 1..%d", ErrInvalid, i, c.Size, MaxChunkBytes)
		}
	}
	if i, j := sizeConflict(m.Chunks); i >= 0 {
		return fmt.Errorf("%w: chunk %d is %d bytes, but chunk %d, the same chunk ID, is %d bytes", ErrInvalid, i, m.Chunks[i].Size, j, m.Chunks[j].Size)
	}
	if err := checkText(m.Producer, MaxProducer); err != nil {
		return fmt.Errorf("%w: producer %s", ErrInvalid, err)
	}
	switch {
	case !m.Created.After(time.Unix(0, 0)):
		return fmt.Errorf("%w: creation time %v is not after 1970", ErrInvalid, m.Created)
	case !time.Unix(0, m.Created.UnixNano()).Equal(m.Created):
		// UnixNano wraps after 2262: the encoding would name another time.
		return fmt.Errorf("%w: creation time %v is past the encoding's last instant, %v", ErrInvalid, m.Created, time.Unix(0, math.MaxInt64).UTC())
	}
	return nil
}

// sizeConflict returns the first chunk i whose ID an earlier chunk j has
// with another size, or -1, -1. A chunk ID names one byte string, so a
// manifest that gives it two sizes describes no pack; and the Merkle root
// covers the IDs only, so nothing else would catch it.
func sizeConflict(chunks []ChunkRef) (i, j int) {
	if len(chunks) < 2 {
		return -1, -1
	}
	first := make(map[Digest]int, len(chunks))
	for i, c := range chunks {
		j, seen := first[c.ID]
		switch {
		case !seen:
			first[c.ID] = i
		case chunks[j].Size != c.Size:
			return i, j
		}
	}
	return -1, -1
}

// CheckRoot returns a *DigestError (wrapping ErrCorrupt) unless m.Root is
// the Merkle root of m's chunk IDs.
func (m *Manifest) CheckRoot() error {
	if got := MerkleRoot(m.ChunkIDs()); got != m.Root {
		return &DigestError{Kind: DigestMerkleRoot, Object: "manifest", Expected: m.Root, Actual: got}
	}
	return nil
}

// Marshal returns the canonical encoding of m. It fails if m does not
// Validate; it does not check the root, so that tests can seal wrong ones.
func (m *Manifest) Marshal() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	idb := m.Identity.appendRaw(nil)
	n := len(m.Chunks)
	b := make([]byte, 0, 12+len(idb)+32+8+4*len(m.Tokens)+36*n+32+2+len(m.Producer)+16)
	b = append(b, ManifestMagic...)
	b = binary.LittleEndian.AppendUint32(b, FormatVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(idb)))
	b = append(b, idb...)
	b = append(b, m.Tenant[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(m.BlockTokens))
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	for _, t := range m.Tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	for _, c := range m.Chunks {
		b = append(b, c.ID[:]...)
		b = binary.LittleEndian.AppendUint32(b, c.Size)
	}
	b = append(b, m.Root[:]...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(m.Producer)))
	b = append(b, m.Producer...)
	b = binary.LittleEndian.AppendUint64(b, m.Generation)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.Created.UnixNano()))
	return b, nil
}

// DecodeManifest decodes a canonical manifest encoding. Every count is
// bounded by the limits and by the bytes present before anything is
// allocated; trailing bytes, negative tokens and any field that Validate
// rejects are errors wrapping ErrCorrupt. It does not check the Merkle
// root (see CheckRoot) so that a verifier can report both faults.
func DecodeManifest(b []byte) (*Manifest, error) {
	d := decoder{obj: "manifest", b: b}
	if uint64(len(b)) > MaxManifestBytes {
		d.limit("length", uint64(len(b)), MaxManifestBytes)
		return nil, d.err
	}
	if magic := d.take("magic", 4); magic != nil && string(magic) != ManifestMagic {
		d.off = 0
		d.fail("magic", fmt.Sprintf("got %q, want %q", magic, ManifestMagic), nil)
	}
	if v := d.u32("version"); d.err == nil && v != FormatVersion {
		d.off -= 4
		d.fail("version", fmt.Sprintf("unsupported version %d (this build reads %d)", v, FormatVersion), nil)
	}
	idLen := d.u32("identity length")
	if d.err == nil && idLen > MaxIdentityBytes {
		d.limit("identity length", uint64(idLen), MaxIdentityBytes)
	}
	idBytes := d.take("identity", int(idLen))
	m := &Manifest{}
	if d.err == nil {
		sub := decoder{obj: "manifest", b: idBytes, base: int64(d.off - len(idBytes))}
		m.Identity = sub.identity()
		sub.end()
		d.err = sub.err
	}
	m.Tenant = d.digest("tenant")
	bt := d.u32("block tokens")
	if d.err == nil && (bt == 0 || bt > MaxBlockTokens) {
		d.off -= 4
		d.fail("block tokens", fmt.Sprintf("%d is outside 1..%d", bt, MaxBlockTokens), nil)
	}
	nb := d.u32("block count")
	if d.err == nil {
		switch {
		case nb == 0:
			d.off -= 4
			d.fail("block count", "is 0", nil)
		case uint64(nb)*uint64(bt) > MaxTokens:
			d.limit("token count", uint64(nb)*uint64(bt), MaxTokens)
		}
	}
	ntok := uint64(nb) * uint64(bt)
	if d.remaining("tokens", 4*ntok+36*uint64(nb)) {
		m.BlockTokens = int(bt)
		m.Tokens = make([]int32, ntok)
		for i := range m.Tokens {
			t := d.u32("token")
			if t > 1<<31-1 {
				d.off -= 4
				d.fail(fmt.Sprintf("token %d", i), fmt.Sprintf("value %d is negative as int32", t), nil)
				break
			}
			m.Tokens[i] = int32(t)
		}
		m.Chunks = make([]ChunkRef, nb)
		for i := range m.Chunks {
			m.Chunks[i].ID = d.digest("chunk id")
			sz := d.u32("chunk size")
			if d.err == nil && (sz == 0 || sz > MaxChunkBytes) {
				d.off -= 4
				d.fail(fmt.Sprintf("chunk %d size", i), fmt.Sprintf("%d is outside 1..%d", sz, MaxChunkBytes), nil)
			}
			m.Chunks[i].Size = sz
		}
		if d.err == nil {
			if i, j := sizeConflict(m.Chunks); i >= 0 {
				d.off -= 36*(len(m.Chunks)-i) - 32 // at chunk i's size
				d.fail(fmt.Sprintf("chunk %d size", i), fmt.Sprintf("%d, but chunk %d, the same chunk ID, is %d bytes", m.Chunks[i].Size, j, m.Chunks[j].Size), nil)
			}
		}
	}
	m.Root = d.digest("merkle root")
	m.Producer = d.text("producer", 2, MaxProducer)
	m.Generation = d.u64("generation")
	created := int64(d.u64("created"))
	if d.err == nil && created <= 0 {
		d.off -= 8
		d.fail("created", fmt.Sprintf("%d is not after 1970", created), nil)
	}
	m.Created = time.Unix(0, created).UTC()
	d.end()
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}
