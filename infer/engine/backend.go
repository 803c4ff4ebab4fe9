package engine

import (
	"context"

	"github.com/muserhq/muser/infer/kvcache"
)

// A Device makes Backends: it binds a model's Weights for its kernels. The
// CPU engine (infer/engine/cpu) is one device; a device holds no model
// until Bind.
type Device interface {
	// Name names the device in logs and errors ("cpu", "cuda:0 NVIDIA H200").
	Name() string
	// Bind prepares w for forward passes whose KV caches hold elements of
	// type kv. w stays valid (and its Data mapped) until the Backend is
	// closed. A weight type the device cannot multiply is a *TensorError
	// wrapping ErrUnsupported.
	Bind(w *Weights, kv kvcache.DType) (Backend, error)
	// HostWeights reports whether the device's forward passes read the
	// weights from host memory (the CPU engine, which Open then gives a
	// model read into resident memory, gguf.Resident, unless
	// Options.Mapped) rather than from copies of its own made at Bind (a
	// GPU, for which the file stays mapped).
	HostWeights() bool
}

// A Backend runs the forward passes of one bound model on one device and
// keeps their KV where it computes (host or device memory). The front
// (Model) checks batches, keeps the sequences' tokens and serialises
// Forward calls; a Backend does the arithmetic.
//
// A backend that claims the numerics named by Numerics computes every bit
// of K, V and logits exactly as the definition of those numerics
// (docs/engine.md, "Numerics"), whatever the batch: a token's result never
// depends on the other rows of a Forward call, on how many there are, or
// on how a batch was split.
type Backend interface {
	// Numerics names the arithmetic the backend computes, the engine
	// field of the pack identity: EngineName for the exact numerics.
	Numerics() string
	// NewKV returns an empty cache for up to maxTokens tokens.
	NewKV(maxTokens int) (KV, error)
	// Forward computes rows, at most MaxRows of them: for each row, the
	// K and V of its token at its position, written to its KV (whose
	// positions before Pos hold the sequence's earlier tokens), and, when
	// Logits is not nil, the logits after it. Rows of one KV are
	// consecutive and in increasing positions; each KV was reserved up to
	// its last row. On error (ctx cancelled, a device fault) the rows'
	// KV beyond the positions before the call is undefined.
	Forward(ctx context.Context, rows []Row) error
	// MaxRows is the most rows one Forward call takes; the front splits
	// longer batches.
	MaxRows() int
	// DecodeBatch is the most one-token rows a Forward call should take
	// when a step holds decode tokens only (more are better split into
	// several calls), or -1 when any number is best taken at once.
	DecodeBatch() int
	// Close releases the backend's resources. KVs it made must not be
	// used afterwards.
	Close() error
}

// KV is one sequence's cache of keys and values, kept by the backend that
// made it, in positions [0, Max()). Its chunk payloads are in the lkv1
// layout (docs/kvpack.md, "Chunk payload"), identical for every backend of
// the same numerics.
type KV interface {
	// Max returns the most tokens the cache holds.
	Max() int
	// Reserve makes room for positions [0, n); more than Max is an error
	// wrapping kvcache.ErrFull.
	Reserve(n int) error
	// Bytes returns the memory the cache holds now.
	Bytes() int64
	// BlockBytes returns the payload size of a block of n tokens.
	BlockBytes(n int) int
	// ExportBlock appends the lkv1 payload of positions [first, first+n)
	// to dst and returns it.
	ExportBlock(dst []byte, first, n int) ([]byte, error)
	// ImportBlock writes an lkv1 payload into positions [first,
	// first+n); a payload of the wrong size is an error wrapping
	// kvcache.ErrChunkSize and leaves the cache unchanged.
	ImportBlock(src []byte, first, n int) error
	// Close releases the cache's memory; the cache must not be used
	// afterwards.
	Close() error
}

// Row is one token of a Forward batch.
type Row struct {
	// KV is the cache of the row's sequence.
	KV KV
	// Token is the token's id, within the vocabulary.
	Token int32
	// Pos is the token's position in its sequence.
	Pos int
	// Logits, when not nil, receives the Vocab logits after the token.
	Logits []float32
	// Hidden, when not nil, receives the Hidden floats of the token's
	// final-normed hidden state: the output norm's result, the input of
	// the output projection (embeddings). Only a backend that implements
	// HiddenBackend fills it; the front refuses the row otherwise.
	Hidden []float32
}

// A HiddenBackend is a Backend that returns final-normed hidden states
// (Row.Hidden), computed with the same arithmetic as the rows' logits
// input. The CPU backend is one.
type HiddenBackend interface {
	Backend
	// HiddenStates reports whether Forward fills Row.Hidden.
	HiddenStates() bool
}
