package engine

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/muserhq/muser/infer/gguf"
)

// RopeType says which elements rotary position embedding rotates together.
type RopeType uint8

// The RoPE variants of ggml.
const (
	// RopeNormal rotates adjacent pairs (2i, 2i+1) (ggml's mode 0; llama).
	RopeNormal RopeType = iota
	// RopeNeoX rotates (i, i+d/2) (ggml's NeoX mode; qwen2, qwen3).
	RopeNeoX
)

// String returns "normal" or "neox".
func (r RopeType) String() string {
	if r == RopeNeoX {
		return "neox"
	}
	return "normal"
}

// Presence says whether an architecture's optional tensors must, may or
// must not be there.
type Presence uint8

// Presence values.
const (
	Absent Presence = iota
	Optional
	Required
)

// Arch is the description of one architecture registered by name: the
// decoder is shared, the variants differ in these switches.
type Arch struct {
	// Name is the value of general.architecture and the prefix of its
	// hyperparameter keys ("llama").
	Name string
	// Rope is the RoPE variant.
	Rope RopeType
	// QKVBias says whether attn_q/k/v.bias tensors are used.
	QKVBias Presence
	// OutBias says whether attn_output.bias is used.
	OutBias Presence
	// QKNorm says whether per-head RMSNorms of Q and K (attn_q_norm,
	// attn_k_norm, applied before RoPE) are used.
	QKNorm Presence
	// RopeFreqs says whether a rope_freqs.weight tensor (per-dimension
	// frequency divisors, Llama 3.1+) is used.
	RopeFreqs Presence
}

var (
	archMu sync.RWMutex
	archs  = map[string]Arch{}
)

// Register makes an architecture available to Load under a.Name. It
// panics if the name is taken (registration happens in init functions).
func Register(a Arch) {
	archMu.Lock()
	defer archMu.Unlock()
	if _, dup := archs[a.Name]; dup {
		panic("engine: architecture " + a.Name + " registered twice")
	}
	archs[a.Name] = a
}

// LookupArch returns the architecture registered under name.
func LookupArch(name string) (Arch, bool) {
	archMu.RLock()
	defer archMu.RUnlock()
	a, ok := archs[name]
	return a, ok
}

// Archs returns the registered architecture names, sorted.
func Archs() []string {
	archMu.RLock()
	defer archMu.RUnlock()
	return slices.Sorted(maps.Keys(archs))
}

// Config holds a model's hyperparameters, read from its GGUF metadata.
type Config struct {
	Arch      string
	Hidden    int // embedding length
	Layers    int
	Heads     int
	KVHeads   int
	HeadDim   int // key (= value) length per head
	FFN       int // feed-forward length
	Vocab     int
	CtxTrain  int // context length the model was trained for
	Rope      RopeType
	RopeDim   int     // dimensions rotated per head (the rest pass through)
	RopeBase  float32 // frequency base
	RopeScale float32 // frequency scale (1/linear factor; 1 when unscaled)
	Eps       float32 // RMSNorm epsilon
	// RopeFreqs holds per-pair frequency divisors (rope_freqs.weight,
	// RopeDim/2 values), nil when the model has none.
	RopeFreqs []float32
	QKNorm    bool // per-head RMSNorm of Q and K
	QKVBias   bool
	OutBias   bool
}

// Limits on hyperparameters, far above any real model, so a hostile file
// cannot make Load allocate absurd buffers.
const (
	maxLayers = 1024
	maxHidden = 1 << 17
	maxHeads  = 1 << 12
	maxFFN    = 1 << 20
	maxVocab  = 1 << 24
	maxCtx    = 1 << 24
)

// KVRow returns the K (or V) elements per token per layer.
func (c Config) KVRow() int { return c.KVHeads * c.HeadDim }

// ArchString returns the canonical description of everything in c that
// shapes K and V, the arch field of the pack identity:
//
//	<arch>;layers=L;hidden=H;heads=N;kv_heads=K;head_dim=D;rope=normal|neox;
//	rope_dim=R;rope_base=B;rope_scale=S;rope_freqs=none|<16 hex of BLAKE3>;
//	eps=E;qk_norm=0|1;qkv_bias=0|1
//
// (one line, no spaces). Floats are printed in the shortest form that
// reads back to the same float32.
func (c Config) ArchString() string {
	f := func(v float32) string { return strconv.FormatFloat(float64(v), 'g', -1, 32) }
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	freqs := "none"
	if c.RopeFreqs != nil {
		freqs = float32sDigest(c.RopeFreqs)
	}
	return strings.Join([]string{
		c.Arch,
		"layers=" + strconv.Itoa(c.Layers),
		"hidden=" + strconv.Itoa(c.Hidden),
		"heads=" + strconv.Itoa(c.Heads),
		"kv_heads=" + strconv.Itoa(c.KVHeads),
		"head_dim=" + strconv.Itoa(c.HeadDim),
		"rope=" + c.Rope.String(),
		"rope_dim=" + strconv.Itoa(c.RopeDim),
		"rope_base=" + f(c.RopeBase),
		"rope_scale=" + f(c.RopeScale),
		"rope_freqs=" + freqs,
		"eps=" + f(c.Eps),
		"qk_norm=" + b(c.QKNorm),
		"qkv_bias=" + b(c.QKVBias),
	}, ";")
}

// readConfig reads the hyperparameters of architecture a from meta. Vocab
// and RopeFreqs come from tensors and are filled in by Load.
func readConfig(meta *gguf.Metadata, a Arch) (*Config, error) {
	p := a.Name + "."
	c := &Config{Arch: a.Name, Rope: a.Rope}
	u := func(key string, dst *int, def int, lo, hi int) error {
		var v uint64
		var err error
		if def < 0 {
			v, err = meta.Uint64(p + key)
		} else {
			v, err = meta.Uint64Or(p+key, uint64(def))
		}
		if err != nil {
			return &HParamError{Key: p + key, Err: err}
		}
		if v < uint64(lo) || v > uint64(hi) {
			return &HParamError{Key: p + key, Err: ErrHParams, Reason: fmt.Sprintf("is %d, want %d..%d", v, lo, hi)}
		}
		*dst = int(v)
		return nil
	}
	if err := u("embedding_length", &c.Hidden, -1, 1, maxHidden); err != nil {
		return nil, err
	}
	if err := u("block_count", &c.Layers, -1, 1, maxLayers); err != nil {
		return nil, err
	}
	if err := u("feed_forward_length", &c.FFN, -1, 1, maxFFN); err != nil {
		return nil, err
	}
	if err := u("attention.head_count", &c.Heads, -1, 1, maxHeads); err != nil {
		return nil, err
	}
	if err := u("attention.head_count_kv", &c.KVHeads, c.Heads, 1, c.Heads); err != nil {
		return nil, err
	}
	if c.Heads%c.KVHeads != 0 {
		return nil, &HParamError{Key: p + "attention.head_count_kv", Err: ErrHParams,
			Reason: fmt.Sprintf("%d kv heads do not divide %d heads", c.KVHeads, c.Heads)}
	}
	defHead := 0
	if c.Hidden%c.Heads == 0 {
		defHead = c.Hidden / c.Heads
	}
	if err := u("attention.key_length", &c.HeadDim, defHead, 1, maxHidden); err != nil {
		return nil, err
	}
	var vlen int
	if err := u("attention.value_length", &vlen, c.HeadDim, 1, maxHidden); err != nil {
		return nil, err
	}
	if vlen != c.HeadDim {
		return nil, &HParamError{Key: p + "attention.value_length", Err: ErrUnsupported,
			Reason: fmt.Sprintf("is %d, differs from key_length %d (not supported)", vlen, c.HeadDim)}
	}
	if err := u("context_length", &c.CtxTrain, 2048, 1, maxCtx); err != nil {
		return nil, err
	}
	if err := u("rope.dimension_count", &c.RopeDim, c.HeadDim, 0, c.HeadDim); err != nil {
		return nil, err
	}
	if c.RopeDim%2 != 0 {
		return nil, &HParamError{Key: p + "rope.dimension_count", Err: ErrHParams, Reason: fmt.Sprintf("is %d, want an even number", c.RopeDim)}
	}
	// fl reads a float; a NaN default makes the key required.
	fl := func(key string, def float32, ok func(float32) bool, want string) (float32, error) {
		var v float32
		var err error
		if math.IsNaN(float64(def)) {
			v, err = meta.Float32(p + key)
		} else {
			v, err = meta.Float32Or(p+key, def)
		}
		if err != nil {
			return 0, &HParamError{Key: p + key, Err: err}
		}
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || !ok(v) {
			return 0, &HParamError{Key: p + key, Err: ErrHParams, Reason: fmt.Sprintf("is %v, want %s", v, want)}
		}
		return v, nil
	}
	var err error
	if c.Eps, err = fl("attention.layer_norm_rms_epsilon", float32(math.NaN()), func(v float32) bool { return v > 0 && v < 1 }, "in (0, 1)"); err != nil {
		return nil, err
	}
	if c.RopeBase, err = fl("rope.freq_base", 10000, func(v float32) bool { return v > 1 }, "> 1"); err != nil {
		return nil, err
	}
	c.RopeScale = 1
	scaling, err := meta.StringOr(p+"rope.scaling.type", "none")
	if err != nil {
		return nil, &HParamError{Key: p + "rope.scaling.type", Err: err}
	}
	switch scaling {
	case "none", "":
		f, err := fl("rope.scale_linear", 1, func(v float32) bool { return v > 0 }, "> 0")
		if err != nil {
			return nil, err
		}
		c.RopeScale = 1 / f
	case "linear":
		f, err := fl("rope.scaling.factor", 1, func(v float32) bool { return v > 0 }, "> 0")
		if err != nil {
			return nil, err
		}
		c.RopeScale = 1 / f
	default:
		return nil, &HParamError{Key: p + "rope.scaling.type", Err: ErrUnsupported,
			Reason: fmt.Sprintf("is %q; muser supports none and linear", scaling)}
	}
	return c, nil
}
