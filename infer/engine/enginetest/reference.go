package enginetest

import (
	"fmt"
	"math"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// Reference computes a model's logits for tokens (teacher-forced: one row
// of Vocab values per position) in float64 from the dequantized weights:
// no activation quantization, no f16 KV rounding, exact RoPE angles. It is
// an independent, slow, straightforward implementation of the decoder the
// engine documents (llama, qwen2, qwen3), used to check the engine and to
// measure how far muser and llama.cpp each are from exact arithmetic.
func Reference(f *gguf.File, tokens []int32) ([][]float64, error) {
	arch, err := f.Meta.String("general.architecture")
	if err != nil {
		return nil, err
	}
	u := func(k string, def int) int {
		v, err := f.Meta.Uint64Or(arch+"."+k, uint64(def))
		if err != nil {
			return def
		}
		return int(v)
	}
	H := u("embedding_length", 0)
	L := u("block_count", 0)
	nh := u("attention.head_count", 0)
	nkv := u("attention.head_count_kv", nh)
	D := u("attention.key_length", H/max(nh, 1))
	rd := u("rope.dimension_count", D)
	eps64, _ := f.Meta.Float32(arch + ".attention.layer_norm_rms_epsilon")
	base, _ := f.Meta.Float32Or(arch+".rope.freq_base", 10000)
	eps := float64(eps64)
	neox := arch == "qwen2" || arch == "qwen3"

	get := func(name string) ([]float64, []int64, error) {
		t, ok := f.Tensor(name)
		if !ok {
			return nil, nil, fmt.Errorf("tensor %s missing", name)
		}
		out32 := make([]float32, t.Elements())
		if err := ggml.Dequantize(t.Type, f.Data(t), out32); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		out := make([]float64, len(out32))
		for i, v := range out32 {
			out[i] = float64(v)
		}
		return out, t.Shape, nil
	}
	opt := func(name string) []float64 {
		v, _, err := get(name)
		if err != nil {
			return nil
		}
		return v
	}
	emb, eshape, err := get("token_embd.weight")
	if err != nil {
		return nil, err
	}
	V := int(eshape[1])
	out := opt("output.weight")
	if out == nil {
		out = emb
	}
	outNorm, _, err := get("output_norm.weight")
	if err != nil {
		return nil, err
	}
	freqs := opt("rope_freqs.weight")

	type lw struct {
		an, q, k, v, o, bq, bk, bv, bo, qn, kn, fn, g, up, down []float64
	}
	layers := make([]lw, L)
	for l := range layers {
		n := func(s string) string { return fmt.Sprintf("blk.%d.%s", l, s) }
		w := &layers[l]
		var err error
		for _, p := range []struct {
			dst  *[]float64
			name string
		}{{&w.an, "attn_norm.weight"}, {&w.q, "attn_q.weight"}, {&w.k, "attn_k.weight"}, {&w.v, "attn_v.weight"},
			{&w.o, "attn_output.weight"}, {&w.fn, "ffn_norm.weight"}, {&w.g, "ffn_gate.weight"},
			{&w.up, "ffn_up.weight"}, {&w.down, "ffn_down.weight"}} {
			if *p.dst, _, err = get(n(p.name)); err != nil {
				return nil, err
			}
		}
		w.bq, w.bk, w.bv, w.bo = opt(n("attn_q.bias")), opt(n("attn_k.bias")), opt(n("attn_v.bias")), opt(n("attn_output.bias"))
		w.qn, w.kn = opt(n("attn_q_norm.weight")), opt(n("attn_k_norm.weight"))
	}
	// matvec: y[r] = Σ_c m[r*cols+c]·x[c].
	matvec := func(m, x []float64, rows int) []float64 {
		cols := len(x)
		y := make([]float64, rows)
		for r := range y {
			s := 0.0
			row := m[r*cols : (r+1)*cols]
			for c, v := range x {
				s += row[c] * v
			}
			y[r] = s
		}
		return y
	}
	rms := func(x, w []float64) []float64 {
		s := 0.0
		for _, v := range x {
			s += v * v
		}
		k := 1 / math.Sqrt(s/float64(len(x))+eps)
		y := make([]float64, len(x))
		for i := range x {
			y[i] = x[i] * k * w[i]
		}
		return y
	}
	add := func(x, b []float64) {
		for i := range b {
			x[i] += b[i]
		}
	}
	rope := func(x []float64, pos int) {
		for i := 0; i < rd/2; i++ {
			theta := float64(pos) * math.Pow(float64(base), -2*float64(i)/float64(rd))
			if freqs != nil {
				theta /= freqs[i]
			}
			a, b := 2*i, 2*i+1
			if neox {
				a, b = i, i+rd/2
			}
			c, s := math.Cos(theta), math.Sin(theta)
			x[a], x[b] = x[a]*c-x[b]*s, x[a]*s+x[b]*c
		}
	}
	Q, KV := nh*D, nkv*D
	kc := make([][][]float64, L) // [layer][pos][KV]
	vc := make([][][]float64, L)
	logits := make([][]float64, len(tokens))
	for pos, tok := range tokens {
		if tok < 0 || int(tok) >= V {
			return nil, fmt.Errorf("token %d outside the vocabulary of %d", tok, V)
		}
		x := append([]float64(nil), emb[int(tok)*H:(int(tok)+1)*H]...)
		for l := range layers {
			w := &layers[l]
			n := rms(x, w.an)
			q, k, v := matvec(w.q, n, Q), matvec(w.k, n, KV), matvec(w.v, n, KV)
			if w.bq != nil {
				add(q, w.bq)
				add(k, w.bk)
				add(v, w.bv)
			}
			for h := range nh {
				if w.qn != nil {
					copy(q[h*D:(h+1)*D], rms(q[h*D:(h+1)*D], w.qn))
				}
				rope(q[h*D:(h+1)*D], pos)
			}
			for h := range nkv {
				if w.kn != nil {
					copy(k[h*D:(h+1)*D], rms(k[h*D:(h+1)*D], w.kn))
				}
				rope(k[h*D:(h+1)*D], pos)
			}
			kc[l] = append(kc[l], k)
			vc[l] = append(vc[l], v)
			att := make([]float64, Q)
			for h := range nh {
				kh := h / (nh / nkv)
				sc := make([]float64, pos+1)
				mx := math.Inf(-1)
				for j := range sc {
					s := 0.0
					for d := range D {
						s += q[h*D+d] * kc[l][j][kh*D+d]
					}
					sc[j] = s / math.Sqrt(float64(D))
					mx = max(mx, sc[j])
				}
				sum := 0.0
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for d := range D {
						att[h*D+d] += sc[j] / sum * vc[l][j][kh*D+d]
					}
				}
			}
			o := matvec(w.o, att, H)
			if w.bo != nil {
				add(o, w.bo)
			}
			add(x, o)
			m := rms(x, w.fn)
			g, up := matvec(w.g, m, len(w.g)/H), matvec(w.up, m, len(w.up)/H)
			for i := range g {
				g[i] = g[i] / (1 + math.Exp(-g[i])) * up[i]
			}
			add(x, matvec(w.down, g, H))
		}
		logits[pos] = matvec(out, rms(x, outNorm), V)
	}
	return logits, nil
}
