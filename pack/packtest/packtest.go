package packtest

import (
	"encoding/binary"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/zeebo/blake3"
)

// Identity returns a valid identity whose fields derive from seed, so
// different seeds give identities that differ in every field but Format.
func Identity(seed string) pack.Identity {
	return pack.Identity{
		Format:    pack.FormatVersion,
		Model:     Digest("model " + seed),
		Arch:      "llama;layers=2;heads=2;kv_heads=1;head_dim=4;rope=normal;rope_base=10000;eps=1e-05;" + seed,
		Tokenizer: Digest("tokenizer " + seed),
		Template:  Digest("template " + seed),
		Quant:     "F32",
		KV:        "f16;block=4;layout=lkv1;" + seed,
		Engine:    "muser-test/1",
	}
}

// Digest returns a deterministic non-zero digest derived from s.
func Digest(s string) pack.Digest { return blake3.Sum256([]byte("packtest " + s)) }

// Tokens returns n deterministic tokens derived from seed, in 0..vocab-1.
func Tokens(seed uint64, n, vocab int) []int32 {
	out := make([]int32, n)
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		out[i] = int32(x % uint64(vocab))
	}
	return out
}

// KV returns synthetic KV bytes for one block: size bytes that depend only
// on the identity key and the block key, as a batch-invariant engine's
// would (the same prefix always gives the same bytes).
func KV(blockKey pack.Digest, size int) []byte {
	out := make([]byte, size)
	h := blake3.New()
	_, _ = h.Write(blockKey[:])
	_, _ = h.Digest().Read(out)
	return out
}

// Manifest returns a valid manifest for tokens under id and the tenant of
// salt, whose chunks are KV(blockKey, chunkSize) for each block, together
// with those chunks. Producer, generation and creation time are fixed.
func Manifest(id pack.Identity, salt []byte, tokens []int32, blockTokens, chunkSize int) (*pack.Manifest, [][]byte) {
	tenant := pack.TenantTag(salt)
	keys := pack.BlockKeys(id.Key(), tenant, tokens, blockTokens)
	m := &pack.Manifest{
		Identity:    id,
		BlockTokens: blockTokens,
		Tenant:      tenant,
		Tokens:      tokens,
		Producer:    "packtest",
		Generation:  7,
		Created:     time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
	}
	chunks := make([][]byte, len(keys))
	for i, k := range keys {
		chunks[i] = KV(k, chunkSize)
		m.Chunks = append(m.Chunks, pack.ChunkRef{ID: pack.ChunkID(chunks[i]), Size: uint32(chunkSize)})
	}
	m.Root = pack.MerkleRoot(m.ChunkIDs())
	return m, chunks
}

// U32 encodes v little-endian, for building malformed inputs by hand.
func U32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// Manifest0Time is the fixed creation time Manifest uses.
func Manifest0Time() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC) }
