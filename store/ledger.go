package store

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/muserhq/muser/pack"
)

// Ledger buckets and meta keys (docs/kvpack.md, "Ledger").
var (
	bucketMeta     = []byte("meta")
	bucketPacks    = []byte("packs")
	bucketBlocks   = []byte("blocks")
	bucketChunks   = []byte("chunks")
	bucketReceipts = []byte("receipts")
	bucketReplay   = []byte("replay")

	metaFormat      = []byte("format")
	metaBlockTokens = []byte("block_tokens")
	metaCreated     = []byte("created")
	metaNode        = []byte("node")
	metaGeneration  = []byte("generation")
	metaSealGen     = []byte("seal_generation")

	replayLast = []byte("last")
)

// ledgerVersion is the version byte of every binary ledger record.
const ledgerVersion = 1

// Pack record flags.
const (
	flagPinned      = 1 << 0
	flagQuarantined = 1 << 1
)

// maxSource bounds a record's source string; encode cuts a longer one
// (an import of a file at a deep path) to it, so that every record it
// writes decodes.
const maxSource = 1024

// packRecord is the ledger's row for one pack (bucket packs, key pack ID).
type packRecord struct {
	flags        uint8
	blocks       uint32
	bytes        uint64 // chunk bytes, counting a repeated chunk per reference
	manifestSize uint32
	identityKey  pack.Digest
	tenant       pack.Digest
	endKey       pack.Digest // block key of the last block
	created      int64       // unix ns
	lastUse      int64       // unix ns
	source       string
}

func (r *packRecord) pinned() bool      { return r.flags&flagPinned != 0 }
func (r *packRecord) quarantined() bool { return r.flags&flagQuarantined != 0 }

func (r *packRecord) encode() []byte {
	source := cutUTF8(r.source, maxSource)
	b := make([]byte, 0, 2+4+8+4+96+16+2+len(source))
	b = append(b, ledgerVersion, r.flags)
	b = binary.LittleEndian.AppendUint32(b, r.blocks)
	b = binary.LittleEndian.AppendUint64(b, r.bytes)
	b = binary.LittleEndian.AppendUint32(b, r.manifestSize)
	b = append(b, r.identityKey[:]...)
	b = append(b, r.tenant[:]...)
	b = append(b, r.endKey[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(r.created))
	b = binary.LittleEndian.AppendUint64(b, uint64(r.lastUse))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(source)))
	return append(b, source...)
}

// eachPack calls fn for every pack record in the ledger that decodes,
// with its ID and, for callers that read other buckets by pack, its key.
// Records that do not decode are skipped here: verify reports them.
func eachPack(tx *bolt.Tx, fn func(k []byte, id pack.Digest, r *packRecord) error) error {
	return tx.Bucket(bucketPacks).ForEach(func(k, v []byte) error {
		id, err := digestKey(k)
		if err != nil {
			return nil
		}
		r, err := decodePackRecord(v)
		if err != nil {
			return nil
		}
		return fn(k, id, r)
	})
}

func decodePackRecord(b []byte) (*packRecord, error) {
	d := rdec{obj: "pack record", b: b}
	d.version()
	r := &packRecord{}
	r.flags = d.u8("flags")
	if r.flags&^(flagPinned|flagQuarantined) != 0 {
		d.fail("flags", fmt.Sprintf("unknown bits %#x", r.flags))
	}
	r.blocks = d.u32("blocks")
	r.bytes = d.u64("bytes")
	r.manifestSize = d.u32("manifest size")
	r.identityKey = d.digest("identity key")
	r.tenant = d.digest("tenant")
	r.endKey = d.digest("end key")
	r.created = int64(d.u64("created"))
	r.lastUse = int64(d.u64("last use"))
	n := d.u16("source length")
	if d.err == nil && n > maxSource {
		d.fail("source length", fmt.Sprintf("%d exceeds %d", n, maxSource))
	}
	r.source = string(d.take("source", int(n)))
	d.end()
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

// chainEntry is one block of a pack in the blocks bucket.
type chainEntry struct {
	key   pack.Digest
	chunk pack.Digest
	size  uint32
}

const chainEntrySize = 32 + 32 + 4

// encodeChain encodes a pack's block chain (bucket blocks, key pack ID):
// version, u32 count, then per block key ‖ chunk ID ‖ u32 size.
func encodeChain(c []chainEntry) []byte {
	b := make([]byte, 0, 5+chainEntrySize*len(c))
	b = append(b, ledgerVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(c)))
	for _, e := range c {
		b = append(b, e.key[:]...)
		b = append(b, e.chunk[:]...)
		b = binary.LittleEndian.AppendUint32(b, e.size)
	}
	return b
}

func decodeChain(b []byte) ([]chainEntry, error) {
	d := rdec{obj: "block chain", b: b}
	d.version()
	n := d.u32("count")
	if d.err == nil {
		if n == 0 || n > pack.MaxTokens {
			d.fail("count", fmt.Sprintf("%d is outside 1..%d", n, pack.MaxTokens))
		} else if uint64(len(b)-d.off) != uint64(n)*chainEntrySize {
			d.fail("count", fmt.Sprintf("%d entries need %d bytes, record has %d", n, uint64(n)*chainEntrySize, len(b)-d.off))
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	c := make([]chainEntry, n)
	for i := range c {
		c[i].key = d.digest("key")
		c[i].chunk = d.digest("chunk")
		c[i].size = d.u32("size")
	}
	d.end()
	if d.err != nil {
		return nil, d.err
	}
	return c, nil
}

// chunkRecord is the ledger's row for one chunk (bucket chunks, key ID).
type chunkRecord struct {
	size uint32
	refs uint32 // references from pack records, counting repeats
}

func (r chunkRecord) encode() []byte {
	b := []byte{ledgerVersion}
	b = binary.LittleEndian.AppendUint32(b, r.size)
	return binary.LittleEndian.AppendUint32(b, r.refs)
}

func decodeChunkRecord(b []byte) (chunkRecord, error) {
	d := rdec{obj: "chunk record", b: b}
	d.version()
	r := chunkRecord{size: d.u32("size"), refs: d.u32("refs")}
	d.end()
	if d.err == nil && (r.size == 0 || r.size > pack.MaxChunkBytes) {
		d.fail("size", fmt.Sprintf("%d is outside 1..%d", r.size, pack.MaxChunkBytes))
	}
	return r, d.err
}

// receiptKey is a receipt's key in bucket receipts: its time (unix ns,
// big-endian so keys sort by time) followed by its 8-byte ID.
func receiptKey(t time.Time, id [8]byte) []byte {
	k := binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano()))
	return append(k, id[:]...)
}

// rdec decodes ledger records; like pack's decoder, its first failure
// sticks and names the record, field and offset.
type rdec struct {
	obj string
	b   []byte
	off int
	err error
}

func (d *rdec) fail(field, problem string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: field %q at offset %d: %s", pack.ErrCorrupt, d.obj, field, d.off, problem)
	}
}

func (d *rdec) take(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b)-d.off < n {
		d.fail(field, "record ends early")
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *rdec) version() {
	if v := d.u8("version"); d.err == nil && v != ledgerVersion {
		d.fail("version", fmt.Sprintf("unknown version %d", v))
	}
}

func (d *rdec) u8(field string) uint8 {
	if p := d.take(field, 1); p != nil {
		return p[0]
	}
	return 0
}

func (d *rdec) u16(field string) uint16 {
	if p := d.take(field, 2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (d *rdec) u32(field string) uint32 {
	if p := d.take(field, 4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *rdec) u64(field string) uint64 {
	if p := d.take(field, 8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *rdec) digest(field string) pack.Digest {
	var x pack.Digest
	if p := d.take(field, 32); p != nil {
		copy(x[:], p)
	}
	return x
}

func (d *rdec) end() {
	if d.err == nil && d.off != len(d.b) {
		d.fail("end", "unexpected trailing bytes")
	}
}

func u32bytes(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64bytes(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func getU64(b []byte) (uint64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b), true
}

func getU32(b []byte) (uint32, bool) {
	if len(b) != 4 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b), true
}
