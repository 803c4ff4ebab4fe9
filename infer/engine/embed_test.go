package engine_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kvcache"
)

// hiddenRun prefills tokens in chunks of the given sizes (the rest in a
// last chunk) and returns every token's hidden state and logits.
func hiddenRun(t *testing.T, m *engine.Model, tokens []int32, chunk int, logits bool) (hid, lg []float32) {
	t.Helper()
	seq, err := m.NewSequence(len(tokens) + 8)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	for lo := 0; lo < len(tokens); lo += chunk {
		st := []engine.Step{{Seq: seq, Tokens: tokens[lo:min(lo+chunk, len(tokens))], Hidden: engine.OutputAll}}
		if logits {
			st[0].Output = engine.OutputAll
		}
		if err := m.Forward(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		hid = append(hid, st[0].HiddenStates...)
		lg = append(lg, st[0].Logits...)
	}
	return hid, lg
}

// TestHiddenStates checks that hidden states are the input of the output
// projection, do not depend on how the prompt is split, and leave the
// logits bit-identical.
func TestHiddenStates(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			path := enginetest.TinyModel(t, arch, ggml.TypeF16)
			m := openModel(t, path, opts{Threads: 2})
			cfg := m.Config()
			H, V := cfg.Hidden, cfg.Vocab
			tokens := enginetest.RandomTokens(rand.New(rand.NewPCG(3, uint64(len(arch)))), 37, V)

			hid, lg := hiddenRun(t, m, tokens, len(tokens), true)
			if len(hid) != len(tokens)*H {
				t.Fatalf("got %d hidden floats, want %d", len(hid), len(tokens)*H)
			}
			_, plain := enginetest.Prefill(t, m, tokens)
			enginetest.RequireSame(t, "logits with hidden states asked", lg, plain)
			for _, chunk := range []int{1, 5, 16} {
				h2, _ := hiddenRun(t, m, tokens, chunk, false)
				enginetest.RequireSame(t, "hidden states in chunks", h2, hid)
			}

			// Last only: the last row.
			seq, err := m.NewSequence(64)
			if err != nil {
				t.Fatal(err)
			}
			st := []engine.Step{{Seq: seq, Tokens: tokens, Hidden: engine.OutputLast}}
			if err := m.Forward(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			enginetest.RequireSame(t, "last hidden state", st[0].HiddenStates, hid[(len(tokens)-1)*H:])

			// logits[i][v] = output[v] · hidden[i], up to the kernels' rounding.
			f := m.File()
			out, ok := f.Tensor("output.weight")
			if !ok {
				out, _ = f.Tensor("token_embd.weight")
			}
			row := make([]float32, H)
			rb := len(f.Data(out)) / V
			for i := range tokens {
				h := hid[i*H : (i+1)*H]
				for v := 0; v < V; v += 7 {
					if err := ggml.Dequantize(out.Type, f.Data(out)[v*rb:(v+1)*rb], row); err != nil {
						t.Fatal(err)
					}
					var dot float64
					for j := range row {
						dot += float64(row[j]) * float64(h[j])
					}
					if got := float64(lg[i*V+v]); math.Abs(got-dot) > 1e-2*(1+math.Abs(dot)) {
						t.Fatalf("token %d: logit %d is %v, want about output·hidden = %v", i, v, got, dot)
					}
				}
			}
		})
	}
}

// plainDevice binds backends that hide HiddenBackend (as a device without
// hidden states would).
type plainDevice struct{ engine.Device }

func (d plainDevice) Bind(w *engine.Weights, kv kvcache.DType) (engine.Backend, error) {
	be, err := d.Device.Bind(w, kv)
	return struct{ engine.Backend }{be}, err
}

func TestHiddenStatesRefused(t *testing.T) {
	path := enginetest.TinyModel(t, "llama", ggml.TypeQ8_0)
	m, err := engine.Open(path, engine.Options{Device: plainDevice{cpu.New(cpu.Options{Threads: 1})}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var de *engine.DeviceError
	if err := m.CheckHiddenStates(); !errors.As(err, &de) || !errors.Is(err, engine.ErrNoHiddenStates) || !strings.HasPrefix(de.Device, "cpu") {
		t.Fatalf("CheckHiddenStates: got %v, want a *DeviceError naming cpu wrapping ErrNoHiddenStates", err)
	}
	seq, err := m.NewSequence(16)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Forward(context.Background(), []engine.Step{{Seq: seq, Tokens: []int32{1, 2}, Hidden: engine.OutputLast}})
	if !errors.Is(err, engine.ErrBatch) {
		t.Fatalf("Forward with hidden states: got %v, want ErrBatch", err)
	}
	if seq.Len() != 0 {
		t.Fatalf("refused batch ran: sequence holds %d tokens, want 0", seq.Len())
	}
	if cm := openModel(t, path, opts{Threads: 1}); cm.CheckHiddenStates() != nil {
		t.Fatalf("cpu CheckHiddenStates: got %v, want nil", cm.CheckHiddenStates())
	}
}

func TestPool(t *testing.T) {
	rows := []float32{1, 2, 3, 3, 4, 5, -1, 0, 1} // three rows of three
	tests := []struct {
		p    engine.Pooling
		want []float32
	}{
		{engine.PoolingMean, []float32{1, 2, 3}},
		{engine.PoolingCLS, []float32{1, 2, 3}},
		{engine.PoolingLast, []float32{-1, 0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.p.String(), func(t *testing.T) {
			got, err := engine.Pool(tc.p, rows, 3)
			if err != nil {
				t.Fatal(err)
			}
			enginetest.RequireSame(t, "pooled", got, tc.want)
		})
	}
	// Mean accumulates in float64: 1e8 + 1 - 1e8 in float32 would lose the 1.
	got, err := engine.Pool(engine.PoolingMean, []float32{1e8, 1, -1e8}, 1)
	if err != nil || got[0] != float32(1.0/3) {
		t.Fatalf("float64 mean: got %v, %v; want %v", got, err, float32(1.0/3))
	}
	for _, bad := range []struct {
		p    engine.Pooling
		rows []float32
		dim  int
	}{
		{engine.PoolingNone, rows, 3},
		{engine.PoolingRank, rows, 3},
		{engine.PoolingMean, nil, 3},
		{engine.PoolingMean, rows, 4},
		{engine.PoolingMean, rows, 0},
	} {
		if _, err := engine.Pool(bad.p, bad.rows, bad.dim); err == nil {
			t.Errorf("Pool(%v, %d floats, dim %d): got nil error, want one", bad.p, len(bad.rows), bad.dim)
		}
	}
}

func TestNormalize(t *testing.T) {
	v := []float32{3, 4}
	engine.Normalize(v)
	if v[0] != float32(3)*float32(1.0/5) || v[1] != float32(4)*float32(1.0/5) {
		t.Fatalf("got %v, want [0.6 0.8]", v)
	}
	z := []float32{0, 0}
	engine.Normalize(z)
	if z[0] != 0 || z[1] != 0 {
		t.Fatalf("zero vector: got %v, want [0 0]", z)
	}
}

// errAny matches any error in TestReadPooling's table.
var errAny = errors.New("any error")

func TestReadPooling(t *testing.T) {
	tests := []struct {
		name    string
		set     any // nil: absent
		want    engine.Pooling
		present bool
		err     error
	}{
		{"absent", nil, engine.PoolingNone, false, nil},
		{"mean u32", uint32(1), engine.PoolingMean, true, nil},
		{"cls i32", int32(2), engine.PoolingCLS, true, nil},
		{"last u32", uint32(3), engine.PoolingLast, true, nil},
		{"none", uint32(0), engine.PoolingNone, true, nil},
		{"rank", uint32(4), engine.PoolingNone, false, engine.ErrUnsupported},
		{"out of range", uint32(9), engine.PoolingNone, false, engine.ErrHParams},
		{"negative", int32(-1), engine.PoolingNone, false, engine.ErrHParams},
		{"string", "mean", engine.PoolingNone, false, errAny},
		{"too large", uint64(1 << 40), engine.PoolingNone, false, errAny},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := gguf.NewBuilder()
			if tc.set != nil {
				if err := b.Set("llama.pooling_type", tc.set); err != nil {
					t.Fatal(err)
				}
			}
			p, ok, err := engine.ReadPooling(b.Meta(), "llama")
			var he *engine.HParamError
			if err != nil && (!errors.As(err, &he) || he.Key != "llama.pooling_type") {
				t.Fatalf("got %v, want an *HParamError naming llama.pooling_type", err)
			}
			if tc.err == errAny && err != nil {
				err = errAny
			}
			if p != tc.want || ok != tc.present || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("got %v, %v, %v; want %v, %v, %v", p, ok, err, tc.want, tc.present, tc.err)
			}
		})
	}
}

func TestParsePooling(t *testing.T) {
	for _, p := range []engine.Pooling{engine.PoolingNone, engine.PoolingMean, engine.PoolingCLS, engine.PoolingLast} {
		got, err := engine.ParsePooling(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePooling(%q): got %v, %v; want %v", p.String(), got, err, p)
		}
	}
	for _, s := range []string{"", "rank", "MEAN", "avg"} {
		if _, err := engine.ParsePooling(s); !errors.Is(err, engine.ErrUnsupported) {
			t.Errorf("ParsePooling(%q): got %v, want ErrUnsupported", s, err)
		}
	}
}
