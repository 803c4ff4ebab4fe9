package cukernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/kernels"
)

// Go references shared by the host-emulation and GPU tests. The kernels'
// definitions live unexported in infer/kernels; the quantizers and the
// rounding helpers are ported here line for line from quant.go (the
// matrix-product tests compare with kernels.MatMul, which quantizes with
// the originals, so a port that drifted would show there).

// refRoundAway is kernels.roundAway.
func refRoundAway(v float32) int8 {
	if !(abs32(v) <= 128) {
		return 0
	}
	t := int32(v)
	f := v - float32(t)
	if f >= 0.5 {
		t++
	} else if f <= -0.5 {
		t--
	}
	return int8(t)
}

// refNearestInt is kernels.nearestInt.
func refNearestInt(v float32) int32 {
	val := v + 12582912
	return int32(math.Float32bits(val)&0x007fffff) - 0x00400000
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

func roundF16(v float32) float32 { return ggml.F16ToF32(ggml.F32ToF16(v)) }

// refQuantQ8_0 is kernels.quantQ8_0: blocks of 32; sums gets Σq, s (when
// not nil) Q8_1's f16(Σq·d) widened.
func refQuantQ8_0(x []float32, q []int8, d []float32, sums []int32, s []float32) {
	for b := range d {
		xb := x[b*32 : b*32+32]
		var amax float32
		for _, v := range xb {
			av := abs32(v)
			if !(amax > av) {
				amax = av
			}
		}
		dd := amax / 127
		var id float32
		if dd != 0 {
			id = 1 / dd
		}
		d[b] = roundF16(dd)
		sum := int32(0)
		for j := range 32 {
			qq := refRoundAway(xb[j] * id)
			q[b*32+j] = qq
			sum += int32(qq)
		}
		sums[b] = sum
		if s != nil {
			s[b] = roundF16(float32(sum) * dd)
		}
	}
}

// refQuantQ8_K is kernels.quantQ8_K: blocks of 256; bs gets the sums of
// each 16.
func refQuantQ8_K(x []float32, q []int8, d []float32, bs []int32) {
	for b := range d {
		xb := x[b*256 : b*256+256]
		qb := q[b*256 : b*256+256]
		var mx, amax float32
		for _, v := range xb {
			if av := abs32(v); av > amax {
				amax, mx = av, v
			}
		}
		if amax == 0 {
			d[b] = 0
			clear(qb)
			clear(bs[b*16 : b*16+16])
			continue
		}
		iscale := -127 / mx
		for j, v := range xb {
			qb[j] = int8(min(127, refNearestInt(iscale*v)))
		}
		for g := range 16 {
			sum := int32(0)
			for _, v := range qb[g*16 : g*16+16] {
				sum += int32(v)
			}
			bs[b*16+g] = sum
		}
		d[b] = 1 / iscale
	}
}

// quantActs holds n rows of activations quantized in form a, laid out as
// the kernels take them (ActBufs).
type quantActs struct {
	q   []int8
	d   []float32
	ext []byte // Q8_1: float s; Q8_K: int32 bsums (little-endian)
	x   []float32
}

// refQuantize quantizes x (n rows of cols) as the GPU quantizers do.
func refQuantize(a Act, x []float32, n, cols int) quantActs {
	var out quantActs
	switch a {
	case ActF32:
		out.x = x
	case ActF16:
		out.x = make([]float32, len(x))
		for i, v := range x {
			out.x[i] = roundF16(v)
		}
	case ActBF16:
		out.x = make([]float32, len(x))
		for i, v := range x {
			out.x[i] = ggml.BF16ToF32(ggml.F32ToBF16(v))
		}
	case ActQ8_0, ActQ8_1:
		nb := cols / 32
		out.q = make([]int8, n*cols)
		out.d = make([]float32, n*nb)
		sums := make([]int32, n*nb)
		var s []float32
		if a == ActQ8_1 {
			s = make([]float32, n*nb)
		}
		for t := range n {
			var st []float32
			if s != nil {
				st = s[t*nb : (t+1)*nb]
			}
			refQuantQ8_0(x[t*cols:(t+1)*cols], out.q[t*cols:(t+1)*cols], out.d[t*nb:(t+1)*nb], sums[t*nb:(t+1)*nb], st)
		}
		if s != nil {
			out.ext = f32Bytes(s)
		}
	case ActQ8_K:
		nb := cols / 256
		out.q = make([]int8, n*cols)
		out.d = make([]float32, n*nb)
		bs := make([]int32, n*cols/16)
		for t := range n {
			refQuantQ8_K(x[t*cols:(t+1)*cols], out.q[t*cols:(t+1)*cols], out.d[t*nb:(t+1)*nb], bs[t*cols/16:(t+1)*cols/16])
		}
		out.ext = i32Bytes(bs)
	}
	return out
}

// refMatMul returns y = W·x (n rows) as the CPU computes it: kernels.MatMul.
func refMatMul(t *testing.T, pool *kernels.Pool, typ ggml.Type, w []byte, rows, cols int, x []float32, qa quantActs, n int) []float32 {
	t.Helper()
	y := make([]float32, n*rows)
	m, err := kernels.NewMatrix(typ, rows, cols, w)
	if err != nil {
		t.Fatal(err)
	}
	pool.MatMul(y, m, x, n)
	return y
}

// ---------------------------------------------------------------------------
// Test data.

// f16FieldsOf lists the byte offsets of the f16 fields of one block.
var f16FieldsOf = map[ggml.Type][]int{
	ggml.TypeQ8_0: {0}, ggml.TypeQ4_0: {0}, ggml.TypeQ4_1: {0, 2}, ggml.TypeQ5_0: {0},
	ggml.TypeQ5_1: {0, 2}, ggml.TypeQ2_K: {80, 82}, ggml.TypeQ3_K: {108}, ggml.TypeQ4_K: {0, 2},
	ggml.TypeQ5_K: {0, 2}, ggml.TypeQ6_K: {208},
}

// randomWeights returns rows×cols weights of type t: random quantized bytes
// whose f16 fields are finite scales of a realistic size (about 1/64,
// with now and then a subnormal, a zero or a negative one), NVFP4 scale
// bytes anywhere in [0, 0x7f], or random floats for the float types.
func randomWeights(rng *rand.Rand, t ggml.Type, rows, cols int) []byte {
	rb, err := t.RowSize(cols)
	if err != nil {
		panic(err)
	}
	data := make([]byte, rows*rb)
	switch t {
	case ggml.TypeF32:
		for i := 0; i < len(data); i += 4 {
			binary.LittleEndian.PutUint32(data[i:], math.Float32bits(randomFloat(rng)))
		}
		return data
	case ggml.TypeF16:
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], ggml.F32ToF16(randomFloat(rng)))
		}
		return data
	case ggml.TypeBF16:
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], ggml.F32ToBF16(randomFloat(rng)))
		}
		return data
	}
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	bs := t.TypeSize()
	for b := 0; b < len(data); b += bs {
		if t == ggml.TypeNVFP4 {
			for s := range 4 {
				data[b+s] = byte(rng.IntN(0x80))
			}
			continue
		}
		for _, off := range f16FieldsOf[t] {
			v := float32(rng.NormFloat64()) / 64
			switch rng.IntN(64) {
			case 0:
				v = 0
			case 1:
				v = float32(rng.IntN(1023)+1) * 0x1p-24 // subnormal
			case 2:
				v = -v
			}
			binary.LittleEndian.PutUint16(data[b+off:], ggml.F32ToF16(v))
		}
	}
	return data
}

// randomFloat returns a unit-size value, now and then an edge value.
func randomFloat(rng *rand.Rand) float32 {
	switch rng.IntN(32) {
	case 0:
		return 0
	case 1:
		return float32(math.Copysign(0, -1))
	case 2:
		return float32(rng.IntN(2000)-1000) * 0x1p-140 // float32 subnormal
	case 3:
		return float32(rng.IntN(9)-4) * 0.5 // halves: rounding ties
	}
	return float32(rng.NormFloat64())
}

// randomActs returns n rows of cols activations with edge rows: all zeros,
// one large value, ties of the largest magnitude in both signs.
func randomActs(rng *rand.Rand, n, cols int) []float32 {
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = randomFloat(rng)
	}
	for t := range n {
		row := x[t*cols : (t+1)*cols]
		switch t % 5 {
		case 1:
			clear(row[:min(len(row), 256)])
		case 2:
			row[rng.IntN(len(row))] = 1e4
		case 3:
			i, j := rng.IntN(len(row)), rng.IntN(len(row))
			row[i], row[j] = 7.5, -7.5
		}
	}
	return x
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func i32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func i8Bytes(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

func bytesF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func bytesU32(b []byte) []uint32 {
	v := make([]uint32, len(b)/4)
	for i := range v {
		v[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return v
}
