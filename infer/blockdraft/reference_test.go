package blockdraft_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// refModel is the drafter in float64, written from docs/blockdraft.md
// alone: every tensor decoded, every operation in float64.
type refModel struct {
	c             blockdraft.Config
	tok, mask, fc [][]float64
	layers        []refLayer
	outNorm       []float64
	output        [][]float64
}

type refLayer struct {
	attnNorm, ffnNorm              []float64
	wq, wk, wv, wo, gate, up, down [][]float64
}

// refMatrix decodes tensor name as rows of float64 (ggml's ne1 rows of
// ne0 values).
func refMatrix(t *testing.T, f *gguf.File, name string) [][]float64 {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("reference: no tensor %s", name)
	}
	cols := int(ti.Shape[0])
	rows := 1
	if len(ti.Shape) > 1 {
		rows = int(ti.Shape[1])
	}
	flat := make([]float32, rows*cols)
	if err := ggml.Dequantize(ti.Type, f.Data(ti), flat); err != nil {
		t.Fatalf("reference: %s: %v", name, err)
	}
	out := make([][]float64, rows)
	for r := range out {
		out[r] = make([]float64, cols)
		for c := range cols {
			out[r][c] = float64(flat[r*cols+c])
		}
	}
	return out
}

func newRef(t *testing.T, f *gguf.File, c blockdraft.Config) *refModel {
	t.Helper()
	m := func(name string) [][]float64 { return refMatrix(t, f, name) }
	v := func(name string) []float64 { return m(name)[0] }
	r := &refModel{c: c, tok: m("token_embd.weight"), mask: m("mask_embd.weight"), fc: m("fc.weight"),
		outNorm: v("output_norm.weight"), output: m("output.weight")}
	for l := range c.Layers {
		n := func(s string) string { return fmt.Sprintf("blk.%d.%s", l, s) }
		r.layers = append(r.layers, refLayer{
			attnNorm: v(n("attn_norm.weight")), ffnNorm: v(n("ffn_norm.weight")),
			wq: m(n("attn_q.weight")), wk: m(n("attn_k.weight")), wv: m(n("attn_v.weight")),
			wo: m(n("attn_output.weight")), gate: m(n("ffn_gate.weight")), up: m(n("ffn_up.weight")),
			down: m(n("ffn_down.weight")),
		})
	}
	return r
}

func mulVec(w [][]float64, x []float64) []float64 {
	y := make([]float64, len(w))
	for r, row := range w {
		var s float64
		for c, v := range row {
			s += v * x[c]
		}
		y[r] = s
	}
	return y
}

func (r *refModel) rmsnorm(x, w []float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+float64(r.c.Eps))
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * s * w[i]
	}
	return out
}

// rope rotates each head's adjacent pairs of x by j·base^(-2i/hd).
func (r *refModel) rope(x []float64, j int) {
	hd := r.c.HeadDim
	for h := 0; h < len(x)/hd; h++ {
		for i := 0; i < hd/2; i++ {
			th := float64(j) * math.Pow(float64(r.c.RopeBase), -2*float64(i)/float64(hd))
			x0, x1 := x[h*hd+2*i], x[h*hd+2*i+1]
			x[h*hd+2*i] = x0*math.Cos(th) - x1*math.Sin(th)
			x[h*hd+2*i+1] = x0*math.Sin(th) + x1*math.Cos(th)
		}
	}
}

// forward returns the logits of positions 1..B-1.
func (r *refModel) forward(hidden []float32, anchor int32) [][]float64 {
	c := r.c
	B, D, hd := c.BlockSize, c.Hidden, c.HeadDim
	x := make([][]float64, B)
	for j := range B {
		e := r.mask[max(j-1, 0)]
		if j == 0 {
			e = r.tok[anchor]
		}
		in := append([]float64(nil), e...)
		for _, v := range hidden {
			in = append(in, float64(v))
		}
		x[j] = mulVec(r.fc, in)
	}
	for _, l := range r.layers {
		q, k, v := make([][]float64, B), make([][]float64, B), make([][]float64, B)
		for j := range B {
			n := r.rmsnorm(x[j], l.attnNorm)
			q[j], k[j], v[j] = mulVec(l.wq, n), mulVec(l.wk, n), mulVec(l.wv, n)
			r.rope(q[j], j)
			r.rope(k[j], j)
		}
		group := c.Heads / c.KVHeads
		for j := range B {
			y := make([]float64, c.Heads*hd)
			for qh := range c.Heads {
				kh := qh / group
				s := make([]float64, B)
				mx := math.Inf(-1)
				for i := range B {
					var d float64
					for e := range hd {
						d += q[j][qh*hd+e] * k[i][kh*hd+e]
					}
					s[i] = d / math.Sqrt(float64(hd))
					mx = math.Max(mx, s[i])
				}
				var sum float64
				for i := range s {
					s[i] = math.Exp(s[i] - mx)
					sum += s[i]
				}
				for i := range B {
					for e := range hd {
						y[qh*hd+e] += s[i] / sum * v[i][kh*hd+e]
					}
				}
			}
			o := mulVec(l.wo, y)
			for e := range D {
				x[j][e] += o[e]
			}
			mm := r.rmsnorm(x[j], l.ffnNorm)
			g, u := mulVec(l.gate, mm), mulVec(l.up, mm)
			for e := range g {
				g[e] = g[e] / (1 + math.Exp(-g[e])) * u[e]
			}
			dn := mulVec(l.down, g)
			for e := range D {
				x[j][e] += dn[e]
			}
		}
	}
	var out [][]float64
	for j := 1; j < B; j++ {
		out = append(out, mulVec(r.output, r.rmsnorm(x[j], r.outNorm)))
	}
	return out
}

// top2 returns the argmax of l and its margin over the runner-up.
func top2(l []float64) (int32, float64) {
	best, second := 0, -1
	for i := 1; i < len(l); i++ {
		switch {
		case l[i] > l[best]:
			best, second = i, best
		case second < 0 || l[i] > l[second]:
			second = i
		}
	}
	return int32(best), l[best] - l[second]
}
