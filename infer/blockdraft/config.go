package blockdraft

import (
	"errors"
	"fmt"
	"math"

	"github.com/muserhq/muser/infer/gguf"
)

// Arch is the general.architecture of a block drafter file, and the
// prefix of its hyperparameter keys.
const Arch = "muser-blockdraft"

// The metadata keys of a block drafter file (docs/blockdraft.md).
const (
	KeyArchitecture = "general.architecture"
	KeyBlockSize    = Arch + ".block_size"
	KeyEmbedding    = Arch + ".embedding_length"
	KeyBlockCount   = Arch + ".block_count"
	KeyFFN          = Arch + ".feed_forward_length"
	KeyHeads        = Arch + ".attention.head_count"
	KeyKVHeads      = Arch + ".attention.head_count_kv"
	KeyEps          = Arch + ".attention.layer_norm_rms_epsilon"
	KeyRopeBase     = Arch + ".rope.freq_base"
	KeyTargetHidden = Arch + ".target_hidden"
	KeyTargetName   = Arch + ".target_name"
	// KeyTokens is the target's token list; its length is the vocabulary.
	KeyTokens = "tokenizer.ggml.tokens"
)

// The limits Load enforces on a drafter's hyperparameters. MinBlockSize
// and MaxBlockSize are the format's; the others only bound what a file can
// make Draft allocate.
const (
	MinBlockSize = 2
	MaxBlockSize = 64
	maxDim       = 1 << 16 // embedding_length, target_hidden
	maxLayers    = 256
	maxFFN       = 1 << 20
	maxVocab     = 1 << 24
)

// Config holds a drafter's hyperparameters.
type Config struct {
	BlockSize    int     // B: positions per block (the anchor and B-1 masks)
	Hidden       int     // D: the drafter's embedding length
	Layers       int     // L
	FFN          int     // F: the feed-forward length
	Heads        int     // NH: query heads
	KVHeads      int     // NKV: key/value heads
	HeadDim      int     // hd = D/NH
	Eps          float32 // the RMSNorm epsilon
	RopeBase     float32 // the RoPE frequency base
	TargetHidden int     // H: the length of the target's hidden state
	TargetName   string  // the target's general.name (informational)
	Vocab        int     // V: the number of tokenizer.ggml.tokens
}

// readConfig reads and checks the hyperparameters in meta.
func readConfig(meta *gguf.Metadata) (Config, error) {
	var c Config
	arch, err := meta.String(KeyArchitecture)
	if err != nil {
		he := metaErr(KeyArchitecture, err)
		he.Err = joinErr(ErrNotBlockDrafter, err)
		return c, he
	}
	if arch != Arch {
		return c, &HParamError{Key: KeyArchitecture, Err: ErrNotBlockDrafter,
			Reason: fmt.Sprintf("is %q, want %q", arch, Arch)}
	}
	u := func(key string, dst *int, lo, hi int) error {
		v, err := meta.Uint64(key)
		if err != nil {
			return metaErr(key, err)
		}
		if v < uint64(lo) || v > uint64(hi) {
			return &HParamError{Key: key, Err: ErrHParams, Reason: fmt.Sprintf("is %d, want %d..%d", v, lo, hi)}
		}
		*dst = int(v)
		return nil
	}
	for _, p := range []struct {
		key    string
		dst    *int
		lo, hi int
	}{
		{KeyBlockSize, &c.BlockSize, MinBlockSize, MaxBlockSize},
		{KeyEmbedding, &c.Hidden, 1, maxDim},
		{KeyBlockCount, &c.Layers, 1, maxLayers},
		{KeyFFN, &c.FFN, 1, maxFFN},
		{KeyHeads, &c.Heads, 1, maxDim},
		{KeyKVHeads, &c.KVHeads, 1, maxDim},
		{KeyTargetHidden, &c.TargetHidden, 1, maxDim},
	} {
		if err := u(p.key, p.dst, p.lo, p.hi); err != nil {
			return c, err
		}
	}
	if c.Hidden%c.Heads != 0 {
		return c, &HParamError{Key: KeyHeads, Err: ErrHParams,
			Reason: fmt.Sprintf("%d heads do not divide the embedding length %d", c.Heads, c.Hidden)}
	}
	if c.Heads%c.KVHeads != 0 {
		return c, &HParamError{Key: KeyKVHeads, Err: ErrHParams,
			Reason: fmt.Sprintf("%d kv heads do not divide %d heads", c.KVHeads, c.Heads)}
	}
	c.HeadDim = c.Hidden / c.Heads
	if c.HeadDim%2 != 0 {
		return c, &HParamError{Key: KeyHeads, Err: ErrHParams,
			Reason: fmt.Sprintf("head dimension %d/%d = %d is odd (RoPE rotates pairs)", c.Hidden, c.Heads, c.HeadDim)}
	}
	f := func(key string, dst *float32) error {
		v, err := meta.Float32(key)
		if err != nil {
			return metaErr(key, err)
		}
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v <= 0 {
			return &HParamError{Key: key, Err: ErrHParams, Reason: fmt.Sprintf("is %v, want a finite positive number", v)}
		}
		*dst = v
		return nil
	}
	if err := f(KeyEps, &c.Eps); err != nil {
		return c, err
	}
	if err := f(KeyRopeBase, &c.RopeBase); err != nil {
		return c, err
	}
	if c.TargetName, err = meta.String(KeyTargetName); err != nil {
		return c, metaErr(KeyTargetName, err)
	}
	v, ok := meta.Get(KeyTokens)
	switch {
	case !ok:
		return c, &HParamError{Key: KeyTokens, Err: ErrHParams, Reason: "missing (the vocabulary is the target's token list)"}
	case !v.IsArray() || v.ElemType() != gguf.TypeString:
		return c, &HParamError{Key: KeyTokens, Err: ErrHParams, Reason: fmt.Sprintf("is %s, want an array of strings", v.TypeName())}
	case v.Len() < 1 || v.Len() > maxVocab:
		return c, &HParamError{Key: KeyTokens, Err: ErrHParams, Reason: fmt.Sprintf("holds %d tokens, want 1..%d", v.Len(), maxVocab)}
	}
	c.Vocab = v.Len()
	return c, nil
}

// metaErr is the *HParamError for a key whose lookup failed (missing, or
// of the wrong type): it matches ErrHParams and the gguf error.
func metaErr(key string, err error) *HParamError {
	reason := err.Error()
	if errors.Is(err, gguf.ErrMissingKey) {
		reason = "missing"
	}
	return &HParamError{Key: key, Err: joinErr(ErrHParams, err), Reason: reason}
}

// joinErr wraps both a sentinel of this package and the cause (a gguf
// *KeyError, say), so errors.Is finds either.
func joinErr(sentinel, cause error) error {
	return fmt.Errorf("%w: %w", sentinel, cause)
}
