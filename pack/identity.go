package pack

// Digest is a 32-byte BLAKE3 digest.
type Digest [32]byte

// Identity says which engine state a pack's KV bytes belong to. A pack is
// usable only by an engine whose identity equals it in all eight fields;
// docs/kvpack.md gives the canonical encoding and the identity key.
type Identity struct {
	// Format is the pack format version (FormatVersion for packs this
	// build writes).
	Format uint32
	// Model is the digest of the weights: every tensor's name, type, shape
	// and data, not the file name.
	Model Digest
	// Arch is a canonical, human-readable description of everything that
	// shapes K and V: architecture, layers, heads, KV heads, head dim, RoPE
	// type/base/scaling, norm epsilon (for example
	// "llama;layers=5;heads=8;kv_heads=4;head_dim=8;rope=normal;rope_base=10000;eps=1e-05").
	Arch string
	// Tokenizer is the digest of the vocabulary, scores or merges, token
	// types, special ids, BOS/EOS behaviour and pre-tokenizer.
	Tokenizer Digest
	// Template is the digest of the chat template text.
	Template Digest
	// Quant names the weight quantization the KV was computed with
	// (for example "Q8_0", or "mixed:<digest>" when tensors differ).
	Quant string
	// KV names the KV dtype, block size and byte layout (for example
	// "f16;block=64;layout=lkv1").
	KV string
	// Engine names the engine and its numerics version, bumped whenever a
	// kernel change can change a result (for example "muser-cpu/1").
	Engine string
}
