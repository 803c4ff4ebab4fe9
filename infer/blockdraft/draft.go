package blockdraft

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/kernels"
)

// Request is one sequence's draft: the block of positions 0..B-1 that
// Draft computes for it starts with Anchor and conditions every position
// on Hidden.
type Request struct {
	// Hidden is the target's final-normed hidden state (the input of its
	// output projection) after the token before Anchor: TargetHidden()
	// floats. Draft only reads it.
	Hidden []float32
	// Anchor is the last token of the sequence: sampled by the target from
	// the logits Hidden gave, not yet fed to it.
	Anchor int32
	// Max is the most tokens wanted, at least 1; more than BlockSize()-1
	// is capped.
	Max int
	// Tokens receives the draft, appended to Tokens[:0]: the drafter's
	// guesses for the min(Max, BlockSize()-1) tokens after Anchor.
	Tokens []int32
}

// logitRows is the most positions whose logits one output product
// computes (bounding the logits buffer at logitRows·V floats).
const logitRows = 64

// workspace holds Draft's buffers, grown to the largest call seen.
type workspace struct {
	n       int       // rows the buffers below hold
	in      []float32 // [n][D+H]: concat(e_j, h)
	x, xn   []float32 // [n][D]
	q, att  []float32 // [n][NH·hd]
	k, v    []float32 // [n][NKV·hd]
	ffA     []float32 // [n][F]
	ffB     []float32 // [n][F]
	scores  []float32 // [requests·NH][B·B]
	out     []int     // the rows whose logits are wanted, in order
	outX    []float32 // [logitRows][D]: their normed states
	logits  []float32 // [logitRows][V]
	outRows int       // rows outX and logits hold
}

func (w *workspace) ensure(c *Config, n int) {
	if n <= w.n {
		return
	}
	Q, KV := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	w.n = n
	w.in = make([]float32, n*(c.Hidden+c.TargetHidden))
	w.x = make([]float32, n*c.Hidden)
	w.xn = make([]float32, n*c.Hidden)
	w.q = make([]float32, n*Q)
	w.att = make([]float32, n*Q)
	w.k = make([]float32, n*KV)
	w.v = make([]float32, n*KV)
	w.ffA = make([]float32, n*c.FFN)
	w.ffB = make([]float32, n*c.FFN)
	w.scores = make([]float32, n/c.BlockSize*c.Heads*c.BlockSize*c.BlockSize)
}

// check returns a *RequestError for the first request Draft cannot
// compute.
func (m *Model) check(reqs []Request) error {
	c := &m.cfg
	for i := range reqs {
		r := &reqs[i]
		switch {
		case len(r.Hidden) != c.TargetHidden:
			return &RequestError{Index: i, Field: "Hidden", Reason: fmt.Sprintf("holds %d floats, want %d", len(r.Hidden), c.TargetHidden)}
		case r.Anchor < 0 || int(r.Anchor) >= c.Vocab:
			return &RequestError{Index: i, Field: "Anchor", Reason: fmt.Sprintf("is %d, want 0..%d", r.Anchor, c.Vocab-1)}
		case r.Max < 1:
			return &RequestError{Index: i, Field: "Max", Reason: fmt.Sprintf("is %d, want at least 1", r.Max)}
		}
	}
	return nil
}

// Draft computes every request's block in one forward pass through the
// drafter (docs/blockdraft.md) and writes each request's draft to its
// Tokens. All requests' positions go through each matrix product
// together; attention stays within each request's block. A request's
// tokens do not depend on the other requests of the call or on the
// thread count. A request Draft cannot compute is a *RequestError naming
// its index, returned before anything is computed; no Tokens are written
// then.
func (m *Model) Draft(ctx context.Context, reqs []Request) error {
	return m.run(ctx, reqs, nil)
}

// Logits computes reqs as Draft does, without writing their Tokens, and
// returns the logits each request's draft tokens are the argmax of:
// logits[i][j-1] holds the V logits of request i's position j, for j = 1
// … min(Max, B-1), in slices of their own. It is for tests and tools that
// compare another implementation of the drafter (the training recipe's)
// with this one; the numbers are those Draft computes, bit for bit.
func (m *Model) Logits(ctx context.Context, reqs []Request) ([][][]float32, error) {
	rs := make([]Request, len(reqs))
	for i, r := range reqs {
		r.Tokens = nil
		rs[i] = r
	}
	out := make([][][]float32, len(reqs))
	err := m.run(ctx, rs, func(r int, logits []float32) {
		out[r] = append(out[r], slices.Clone(logits))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// run computes reqs and writes their Tokens; keep, if not nil, sees each
// wanted position's logits in order (request r's positions 1, 2, …).
func (m *Model) run(ctx context.Context, reqs []Request, keep func(r int, logits []float32)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if len(reqs) == 0 {
		return nil
	}
	if err := m.check(reqs); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &m.cfg
	B := c.BlockSize
	n := len(reqs) * B
	w := &m.ws
	w.ensure(c, n)
	m.embed(reqs, w.in)
	m.pool.MatMul(w.x, m.fc, w.in, n)
	for li := range m.layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		m.layer(&m.layers[li], len(reqs), n)
	}
	w.out = m.OutputRows(reqs, w.out)
	for lo := 0; lo < len(w.out); lo += logitRows {
		rows := w.out[lo:min(lo+logitRows, len(w.out))]
		m.logits(rows)
		for i, row := range rows {
			r := row / B
			l := w.logits[i*c.Vocab : (i+1)*c.Vocab]
			reqs[r].Tokens = append(reqs[r].Tokens, Argmax(l))
			if keep != nil {
				keep(r, l)
			}
		}
	}
	return nil
}

// OutputRows empties every request's Tokens and returns, appended to
// rows[:0], the rows of a call over reqs whose logits are wanted (request
// r's position j is row r·B + j): positions 1 … min(Max, B-1) of each
// request, in order. A draft token is the Argmax of its row's logits.
func (m *Model) OutputRows(reqs []Request, rows []int) []int {
	B := m.cfg.BlockSize
	rows = rows[:0]
	for r := range reqs {
		k := min(reqs[r].Max, B-1)
		reqs[r].Tokens = reqs[r].Tokens[:0]
		for j := 1; j <= k; j++ {
			rows = append(rows, r*B+j)
		}
	}
	return rows
}

// Inputs checks reqs as Draft does (a *RequestError naming the first
// request it cannot compute, before anything is written) and writes the
// fc input of every row of the call to in, which holds at least
// len(reqs)·B·(D+H) floats: row r·B + j is concat(e_j, h) of request r
// (docs/blockdraft.md). A device that computes the rest of the forward
// pass (Binder) starts from it.
func (m *Model) Inputs(reqs []Request, in []float32) error {
	if err := m.check(reqs); err != nil {
		return err
	}
	c := &m.cfg
	if need := len(reqs) * c.BlockSize * (c.Hidden + c.TargetHidden); len(in) < need {
		return fmt.Errorf("blockdraft: Inputs: %d floats for %d requests, want %d", len(in), len(reqs), need)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.embed(reqs, in)
	return nil
}

// embed writes every row's fc input to in: e_j (the anchor's embedding at
// position 0, mask embedding j-1 at position j ≥ 1) followed by the
// request's hidden state.
func (m *Model) embed(reqs []Request, in []float32) {
	c := &m.cfg
	D, H, B := c.Hidden, c.TargetHidden, c.BlockSize
	m.each(len(reqs)*B, func(row int) {
		r, j := row/B, row%B
		dst := in[row*(D+H) : (row+1)*(D+H)]
		if j == 0 {
			e := m.tokEmbd
			a := int(reqs[r].Anchor)
			// The type decodes and the row size was checked at Load, so
			// Dequantize cannot fail.
			_ = ggml.Dequantize(e.Type, e.Data[a*e.RowBytes:(a+1)*e.RowBytes], dst[:D])
		} else {
			copy(dst[:D], m.mask[(j-1)*D:j*D])
		}
		copy(dst[D:], reqs[r].Hidden)
	})
}

// layer runs one transformer block over the n rows of nreq requests.
func (m *Model) layer(l *layer, nreq, n int) {
	c := &m.cfg
	w := &m.ws
	D, F, B, hd := c.Hidden, c.FFN, c.BlockSize, c.HeadDim
	Q, KV := c.Heads*hd, c.KVHeads*hd
	x, xn := w.x[:n*D], w.xn[:n*D]
	m.each(n, func(i int) { kernels.RMSNorm(xn[i*D:(i+1)*D], x[i*D:(i+1)*D], l.attnNorm, c.Eps) })
	m.pool.MatMul(w.q, l.wq, xn, n)
	m.pool.MatMul(w.k, l.wk, xn, n)
	m.pool.MatMul(w.v, l.wv, xn, n)
	m.each(n, func(i int) {
		cs := m.rope[(i%B)*hd : (i%B+1)*hd]
		for h := range c.Heads {
			rotate(w.q[i*Q+h*hd:i*Q+(h+1)*hd], cs)
		}
		for h := range c.KVHeads {
			rotate(w.k[i*KV+h*hd:i*KV+(h+1)*hd], cs)
		}
	})
	m.each(nreq*c.Heads, func(t int) { m.attend(t/c.Heads, t%c.Heads) })
	m.pool.MatMul(xn, l.wo, w.att, n)
	m.each(n, func(i int) {
		xi, oi := x[i*D:(i+1)*D], xn[i*D:(i+1)*D]
		kernels.Add(xi, xi, oi)
		kernels.RMSNorm(oi, xi, l.ffnNorm, c.Eps)
	})
	m.pool.MatMul(w.ffA, l.gate, xn, n)
	m.pool.MatMul(w.ffB, l.up, xn, n)
	m.each(n, func(i int) { kernels.SiLUMul(w.ffA[i*F:(i+1)*F], w.ffA[i*F:(i+1)*F], w.ffB[i*F:(i+1)*F]) })
	m.pool.MatMul(xn, l.down, w.ffA, n)
	m.each(n, func(i int) { kernels.Add(x[i*D:(i+1)*D], x[i*D:(i+1)*D], xn[i*D:(i+1)*D]) })
}

// attend computes query head h's attention output for every position of
// request r's block: softmax over all B positions of the block (no causal
// mask) of q·k/√hd, then the weighted sum of the v rows, in float32 with
// the kernels' Dot, Softmax and AXPY.
func (m *Model) attend(r, h int) {
	c := &m.cfg
	w := &m.ws
	B, hd := c.BlockSize, c.HeadDim
	Q, KV := c.Heads*hd, c.KVHeads*hd
	kvh := h / (c.Heads / c.KVHeads)
	scale := float32(1 / math.Sqrt(float64(hd)))
	s := w.scores[(r*c.Heads+h)*B*B : (r*c.Heads+h+1)*B*B]
	base := r * B
	for j := range B {
		sj := s[j*B : (j+1)*B]
		q := w.q[(base+j)*Q+h*hd : (base+j)*Q+(h+1)*hd]
		for i := range B {
			sj[i] = kernels.Dot(w.k[(base+i)*KV+kvh*hd:(base+i)*KV+(kvh+1)*hd], q) * scale
		}
		kernels.Softmax(sj)
		out := w.att[(base+j)*Q+h*hd : (base+j)*Q+(h+1)*hd]
		clear(out)
		for i := range B {
			kernels.AXPY(out, sj[i], w.v[(base+i)*KV+kvh*hd:(base+i)*KV+(kvh+1)*hd])
		}
	}
}

// rotate applies RoPE to one head's vector: each adjacent pair (x[2i],
// x[2i+1]) turns by the angle whose cos and sin are cs[2i], cs[2i+1].
// Every product is rounded to float32 before the sum (the explicit
// conversions forbid fused multiply-adds).
func rotate(x, cs []float32) {
	for i := 0; i < len(x)/2; i++ {
		co, s := cs[2*i], cs[2*i+1]
		x0, x1 := x[2*i], x[2*i+1]
		x[2*i] = float32(x0*co) - float32(x1*s)
		x[2*i+1] = float32(x0*s) + float32(x1*co)
	}
}

// logits computes the output logits of the given rows (at most
// logitRows) into ws.logits, in order.
func (m *Model) logits(rows []int) {
	c := &m.cfg
	w := &m.ws
	D, V := c.Hidden, c.Vocab
	if w.outRows < len(rows) {
		k := min(logitRows, len(w.out))
		w.outX = make([]float32, k*D)
		w.logits = make([]float32, k*V)
		w.outRows = k
	}
	m.each(len(rows), func(i int) {
		row := rows[i]
		kernels.RMSNorm(w.outX[i*D:(i+1)*D], w.x[row*D:(row+1)*D], m.outNorm, c.Eps)
	})
	m.pool.MatMul(w.logits, m.output, w.outX, len(rows))
}

// Argmax returns the index of the largest logit that is not NaN, the
// lowest on ties; 0 when every logit is NaN: a draft token from its
// position's logits.
func Argmax(l []float32) int32 {
	best, idx := l[0], 0
	for i, v := range l[1:] {
		if v > best || (best != best && v == v) {
			best, idx = v, i+1
		}
	}
	return int32(idx)
}

// each runs f(i) for i in [0,n) on the pool (inline for one item).
func (m *Model) each(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	m.pool.Parallel(n, f)
}
