package engine

import (
	"fmt"
	"math"

	"github.com/muserhq/muser/infer/gguf"
)

// Pooling says how the hidden states of a prompt's tokens become one
// embedding. The values are llama.cpp's (enum llama_pooling_type), as
// written in a GGUF's <arch>.pooling_type.
type Pooling int

// Pooling values.
const (
	PoolingNone Pooling = 0 // no pooled embedding: one vector per token
	PoolingMean Pooling = 1 // the mean of every token's hidden state
	PoolingCLS  Pooling = 2 // the first token's hidden state
	PoolingLast Pooling = 3 // the last token's hidden state
	PoolingRank Pooling = 4 // a reranker's classification head (not supported)
)

// KeyPoolingType is the metadata key suffix naming a model's pooling:
// "<arch>.pooling_type".
const KeyPoolingType = "pooling_type"

// String names the pooling as llama-server's --pooling flag does.
func (p Pooling) String() string {
	switch p {
	case PoolingNone:
		return "none"
	case PoolingMean:
		return "mean"
	case PoolingCLS:
		return "cls"
	case PoolingLast:
		return "last"
	case PoolingRank:
		return "rank"
	}
	return fmt.Sprintf("pooling(%d)", int(p))
}

// ParsePooling reads a pooling name: none, mean, cls or last.
func ParsePooling(s string) (Pooling, error) {
	for _, p := range []Pooling{PoolingNone, PoolingMean, PoolingCLS, PoolingLast} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: pooling %q (want none, mean, cls or last)", ErrUnsupported, s)
}

// ReadPooling returns the pooling a GGUF file declares in
// <arch>.pooling_type, and whether it declares one. A value other than
// none, mean, cls or last is an *HParamError.
func ReadPooling(meta *gguf.Metadata, arch string) (Pooling, bool, error) {
	key := arch + "." + KeyPoolingType
	if !meta.Has(key) {
		return PoolingNone, false, nil
	}
	v, err := meta.Int32(key)
	if err != nil {
		return PoolingNone, false, &HParamError{Key: key, Err: err}
	}
	switch p := Pooling(v); p {
	case PoolingNone, PoolingMean, PoolingCLS, PoolingLast:
		return p, true, nil
	case PoolingRank:
		return PoolingNone, false, &HParamError{Key: key, Err: ErrUnsupported, Reason: "is 4 (rank): rerankers are not supported"}
	}
	return PoolingNone, false, &HParamError{Key: key, Err: ErrHParams, Reason: fmt.Sprintf("is %d, want 0 to 3", v)}
}

// Pool pools n hidden states (hidden holds n·dim floats, the prompt's
// tokens in order) into one vector of dim floats:
//
//   - mean: each element summed over the tokens in float64, in token
//     order, divided by n, then rounded to float32;
//   - cls: the first token's state;
//   - last: the last token's state.
//
// The result is not normalized (see Normalize). PoolingNone and
// PoolingRank, an empty input or a length not a multiple of dim are
// errors.
func Pool(p Pooling, hidden []float32, dim int) ([]float32, error) {
	if dim <= 0 || len(hidden) == 0 || len(hidden)%dim != 0 {
		return nil, fmt.Errorf("%w: pooling %d floats in rows of %d", ErrBatch, len(hidden), dim)
	}
	n := len(hidden) / dim
	out := make([]float32, dim)
	switch p {
	case PoolingMean:
		acc := make([]float64, dim)
		for i := range n {
			for j, v := range hidden[i*dim : (i+1)*dim] {
				acc[j] += float64(v)
			}
		}
		for j, v := range acc {
			out[j] = float32(v / float64(n))
		}
	case PoolingCLS:
		copy(out, hidden[:dim])
	case PoolingLast:
		copy(out, hidden[(n-1)*dim:])
	default:
		return nil, fmt.Errorf("%w: pooling %v gives no single embedding", ErrUnsupported, p)
	}
	return out, nil
}

// Normalize scales v to unit Euclidean length in place, as llama.cpp's
// common_embd_normalize with embd_normalize = 2 (its server's default)
// and Ollama's /api/embed do: the sum of squares is accumulated in
// float64, and each element is multiplied by the float32 of 1/√sum. A
// zero vector stays zero.
func Normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	var k float32
	if sum > 0 {
		k = float32(1 / math.Sqrt(sum))
	}
	for i := range v {
		v[i] *= k
	}
}

// HiddenStates reports whether the model's backend returns final-normed
// hidden states (Step.Hidden), which embeddings need.
func (m *Model) HiddenStates() bool {
	hb, ok := m.be.(HiddenBackend)
	return ok && hb.HiddenStates()
}

// CheckHiddenStates returns nil when the model's backend returns hidden
// states, else a *DeviceError wrapping ErrNoHiddenStates that names the
// device.
func (m *Model) CheckHiddenStates() error {
	if m.HiddenStates() {
		return nil
	}
	return m.errNoHidden()
}

func (m *Model) errNoHidden() error {
	return &DeviceError{Device: m.dev.Name(), Op: "hidden states (embeddings)", Err: ErrNoHiddenStates}
}
