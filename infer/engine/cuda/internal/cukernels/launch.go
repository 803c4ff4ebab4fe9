package cukernels

import (
	"fmt"
	"math"
	"slices"

	"github.com/muserhq/muser/infer/ggml"
)

// DevPtr is an address in device memory.
type DevPtr uint64

// Launch is everything cuLaunchKernel needs for one kernel launch except
// the function handle and the stream: the kernel's name in the module,
// the grid and block dimensions, the bytes of dynamic shared memory, and
// the arguments in the kernel's parameter order, each a uint64 (a device
// address), an int32, a uint32 or a float32 (manifest_test.go checks
// every builder's arguments against the PTX parameter list). A launch
// whose Shared and the kernel's static shared memory together pass 48 KiB
// needs the function's maximum dynamic shared memory raised first
// (cuFuncSetAttribute), as the tiled integer products' do (mmqShared: 47
// KiB beside 3 KiB of static tables for Q8_0, up to 81 KiB for Q6_K); the
// backend raises it for every launch with dynamic shared memory.
type Launch struct {
	Kernel      string
	Grid, Block [3]uint32
	Shared      uint32
	Args        []any
}

// Param is the type of one kernel parameter as its PTX declares it.
type Param uint8

// The parameter types.
const (
	Ptr Param = iota // a device address (.u64); an argument of type uint64
	I32              // an int or unsigned (.u32, .s32); int32 or uint32
	F32              // a float (.f32); float32
)

// Kernel describes one kernel of the module.
type Kernel struct {
	Name   string
	Params []Param
	// ExactFMA marks the kernels that use fused multiply-adds, each on a
	// product that is exact (f16 × f16), so that fused and unfused agree.
	// Only these may hold FFMA in their SASS (TestArtifacts).
	ExactFMA bool
	// TensorCores marks the kernels whose SASS must hold integer tensor
	// core instructions (IMMA).
	TensorCores bool
	// SelfTest marks the kernels that exist only for the GPU tests.
	SelfTest bool
}

var (
	intMatMulParams   = []Param{Ptr, I32, I32, Ptr, Ptr, Ptr, Ptr, I32}
	intMatVecParams   = []Param{Ptr, I32, I32, Ptr, Ptr, Ptr, Ptr, I32, Ptr, Ptr}
	floatMatMulParams = []Param{Ptr, I32, I32, Ptr, Ptr, I32}
	embedParams       = []Param{Ptr, I32, I32, Ptr, I32, Ptr}
	scoresParams      = []Param{Ptr, I32, I32, I32, Ptr, Ptr, Ptr, Ptr, Ptr, I32, F32, I32}
	wsumParams        = []Param{Ptr, Ptr, I32, Ptr, Ptr, Ptr, Ptr, I32, I32, I32}
	wsumRowsParams    = []Param{Ptr, Ptr, I32, I32, Ptr, Ptr, Ptr, Ptr, I32, I32, I32, I32, I32, I32}
	scoresRowsParams  = []Param{Ptr, I32, I32, I32, Ptr, Ptr, Ptr, Ptr, I32, F32}
	kvStoreParams     = []Param{Ptr, Ptr, I32, I32, Ptr, Ptr, Ptr}
	ropeAttnParams    = []Param{Ptr, Ptr, Ptr, I32, I32, I32, I32, I32, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, F32, Ptr, Ptr, Ptr}
)

// intTypes are the weight types of the integer matrix products, with the
// kernel name suffix.
var intTypes = []struct {
	t    ggml.Type
	name string
}{
	{ggml.TypeQ8_0, "q8_0"}, {ggml.TypeQ4_0, "q4_0"}, {ggml.TypeQ5_0, "q5_0"},
	{ggml.TypeQ4_1, "q4_1"}, {ggml.TypeQ5_1, "q5_1"},
	{ggml.TypeQ2_K, "q2_k"}, {ggml.TypeQ3_K, "q3_k"}, {ggml.TypeQ4_K, "q4_k"},
	{ggml.TypeQ5_K, "q5_k"}, {ggml.TypeQ6_K, "q6_k"}, {ggml.TypeNVFP4, "nvfp4"},
}

var floatTypes = []struct {
	t    ggml.Type
	name string
}{{ggml.TypeF32, "f32"}, {ggml.TypeF16, "f16"}, {ggml.TypeBF16, "bf16"}}

// kernelTable lists every kernel of the module.
var kernelTable = func() []Kernel {
	ks := []Kernel{
		{Name: "muser_quant_q8_0", Params: []Param{Ptr, I32, I32, Ptr, Ptr, Ptr, Ptr}},
		{Name: "muser_quant_q8_k", Params: []Param{Ptr, I32, I32, Ptr, Ptr, Ptr}},
		{Name: "muser_round_f16", Params: []Param{Ptr, Ptr, I32}},
		{Name: "muser_round_bf16", Params: []Param{Ptr, Ptr, I32}},
		{Name: "muser_rmsnorm", Params: []Param{Ptr, Ptr, Ptr, I32, I32, Ptr, F32, Ptr, Ptr, Ptr, Ptr}},
		{Name: "muser_add_rmsnorm", Params: []Param{Ptr, Ptr, Ptr, Ptr, Ptr, I32, I32, F32, Ptr, Ptr, Ptr, Ptr}},
		{Name: "muser_rmsnorm_heads", Params: []Param{Ptr, I32, I32, I32, I32, Ptr, F32}},
		{Name: "muser_add", Params: []Param{Ptr, Ptr, Ptr, I32}},
		{Name: "muser_add_bias", Params: []Param{Ptr, Ptr, I32, I32}},
		{Name: "muser_silu_mul", Params: []Param{Ptr, Ptr, Ptr, I32}},
		{Name: "muser_silu_mul_quant", Params: []Param{Ptr, Ptr, Ptr, I32, I32, Ptr, Ptr, Ptr, Ptr}},
		{Name: "muser_rope", Params: []Param{Ptr, I32, I32, I32, I32, I32, I32, Ptr}},
		{Name: "muser_kv_store_f16", Params: kvStoreParams},
		{Name: "muser_rope_kv_store", Params: []Param{Ptr, Ptr, Ptr, I32, I32, I32, I32, I32, I32, Ptr, Ptr, Ptr, Ptr, I32}},
		{Name: "muser_kv_store_f32", Params: kvStoreParams},
		{Name: "muser_attn_scores_f16", Params: scoresParams, ExactFMA: true},
		{Name: "muser_attn_scores_f32", Params: scoresParams},
		{Name: "muser_attn_scores_rows_f16", Params: scoresRowsParams, ExactFMA: true},
		{Name: "muser_attn_scores_rows_f32", Params: scoresRowsParams},
		{Name: "muser_attn_softmax_part", Params: []Param{Ptr, Ptr, Ptr, I32, I32, Ptr, I32}},
		{Name: "muser_attn_softmax8", Params: []Param{Ptr, Ptr, Ptr, I32, Ptr, I32, I32}},
		{Name: "muser_attn_wsum_f16", Params: wsumParams, ExactFMA: true},
		{Name: "muser_attn_wsum_f32", Params: wsumParams},
		{Name: "muser_attn_wsum_rows_f16", Params: wsumRowsParams, ExactFMA: true},
		{Name: "muser_attn_wsum_rows_f32", Params: wsumRowsParams},
		{Name: "muser_attn_wsum_parts", Params: []Param{Ptr, Ptr, Ptr, I32, I32, I32, I32, Ptr, Ptr, Ptr}},
		{Name: "muser_rope_attn_f16", Params: ropeAttnParams, ExactFMA: true},
		{Name: "muser_rope_attn_f32", Params: ropeAttnParams},
		{Name: "muser_test_exp32", Params: []Param{Ptr, Ptr, I32}, SelfTest: true},
		{Name: "muser_test_f32_bits", Params: []Param{I32, I32, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr}, SelfTest: true},
		{Name: "muser_test_small_tables", Params: []Param{Ptr, Ptr, Ptr}, SelfTest: true},
		{Name: "muser_test_softmax_weights", Params: []Param{Ptr, Ptr, I32, I32, Ptr, I32, I32}, SelfTest: true},
	}
	for _, t := range intTypes {
		ks = append(ks,
			Kernel{Name: "muser_mmq_" + t.name, Params: intMatMulParams, TensorCores: true},
			Kernel{Name: "muser_mmv_" + t.name, Params: intMatVecParams},
			Kernel{Name: "muser_embed_" + t.name, Params: embedParams})
	}
	for _, t := range floatTypes {
		fma := t.t == ggml.TypeF16
		ks = append(ks,
			Kernel{Name: "muser_mmf_" + t.name, Params: floatMatMulParams, ExactFMA: fma},
			Kernel{Name: "muser_mmfv_" + t.name, Params: floatMatMulParams, ExactFMA: fma},
			Kernel{Name: "muser_embed_" + t.name, Params: embedParams})
	}
	slices.SortFunc(ks, func(a, b Kernel) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return ks
}()

// KernelTable returns the description of every kernel of the module,
// sorted by name.
func KernelTable() []Kernel {
	out := make([]Kernel, len(kernelTable))
	for i, k := range kernelTable {
		k.Params = slices.Clone(k.Params)
		out[i] = k
	}
	return out
}

// Limits of the grid: CUDA's for x, y and z, and the int32 range of the
// kernels' counts.
const (
	maxGridX = 1<<31 - 1
	maxGridY = 65535
	maxInt32 = 1<<31 - 1
)

// launch assembles a Launch after checking its grid.
func launch(kernel string, grid [3]int, block int, shared int, args ...any) (Launch, error) {
	if grid[0] < 1 || grid[1] < 1 || grid[2] < 1 || grid[0] > maxGridX || grid[1] > maxGridY || grid[2] > maxGridY {
		return Launch{}, shapeErr(kernel, "grid %v is outside CUDA's limits", grid)
	}
	return Launch{
		Kernel: kernel,
		Grid:   [3]uint32{uint32(grid[0]), uint32(grid[1]), uint32(grid[2])},
		Block:  [3]uint32{uint32(block), 1, 1},
		Shared: uint32(shared),
		Args:   args,
	}, nil
}

func shapeErr(kernel, format string, a ...any) error {
	return &LaunchError{Kernel: kernel, Err: fmt.Errorf("%w: "+format, append([]any{ErrShape}, a...)...)}
}

// positive checks that every count is in [1, 2^31).
func positive(kernel string, counts ...int) error {
	for _, c := range counts {
		if c < 1 || c > maxInt32 {
			return shapeErr(kernel, "count %d is not in [1, 2^31)", c)
		}
	}
	return nil
}

// product checks that a·b fits the kernels' int32 indexing.
func product(kernel string, a, b int) error {
	if a > maxInt32/b {
		return shapeErr(kernel, "%d × %d elements overflow int32", a, b)
	}
	return nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func p(d DevPtr) any    { return uint64(d) }
func i32(v int) any     { return int32(v) }
func f32(v float32) any { return v }
func flag(b bool) any {
	if b {
		return int32(1)
	}
	return int32(0)
}
func elems256(n int) int { return ceilDiv(n, 256) }

// ---------------------------------------------------------------------------
// Activations.

// Act is the form a weight type's matrix product takes its activations in
// (kernels.MatMul quantizes them the same way).
type Act uint8

// The activation forms.
const (
	ActF32  Act = iota // F32 weights: x as it is
	ActF16             // F16 weights: x rounded to f16, as float32
	ActBF16            // BF16 weights: x rounded to bf16, as float32
	ActQ8_0            // Q8_0, Q4_0, Q5_0, NVFP4 weights
	ActQ8_1            // Q4_1, Q5_1 weights: Q8_0 plus the sums s
	ActQ8_K            // K-quant weights
)

// String names the form: f32, f16, bf16, q8_0, q8_1 or q8_k.
func (a Act) String() string {
	if int(a) < len(actNames) {
		return actNames[a]
	}
	return fmt.Sprintf("act(%d)", uint8(a))
}

var actNames = [...]string{"f32", "f16", "bf16", "q8_0", "q8_1", "q8_k"}

// ActOf returns the activation form of weight type t, or an error
// wrapping ErrType.
func ActOf(t ggml.Type) (Act, error) {
	switch t {
	case ggml.TypeF32:
		return ActF32, nil
	case ggml.TypeF16:
		return ActF16, nil
	case ggml.TypeBF16:
		return ActBF16, nil
	case ggml.TypeQ8_0, ggml.TypeQ4_0, ggml.TypeQ5_0, ggml.TypeNVFP4:
		return ActQ8_0, nil
	case ggml.TypeQ4_1, ggml.TypeQ5_1:
		return ActQ8_1, nil
	case ggml.TypeQ2_K, ggml.TypeQ3_K, ggml.TypeQ4_K, ggml.TypeQ5_K, ggml.TypeQ6_K:
		return ActQ8_K, nil
	}
	return 0, &LaunchError{Kernel: "matmul " + t.String(), Err: ErrType}
}

// ActBufs are the device buffers of n token rows of activations in one
// form (ActSizes gives their sizes), each 16-byte aligned:
//
//	ActF16, ActBF16: X float [n][cols] (may be the input itself)
//	ActQ8_0: Q int8 [n][cols], D float [n][cols/32] (scales, f16 widened)
//	ActQ8_1: Q, D as Q8_0; Ext float [n][cols/32] (s = f16(d·Σq) widened)
//	ActQ8_K: Q int8 [n][cols], D float [n][cols/256], Ext int32 [n][cols/16] (bsums)
type ActBufs struct {
	X, Q, D, Ext DevPtr
}

// ActSizes returns the bytes of each of ActBufs's buffers that n rows of
// cols activations in form a need (0 for a buffer the form does not use).
func ActSizes(a Act, n, cols int) (x, q, d, ext int64) {
	N, C := int64(n), int64(cols)
	switch a {
	case ActF16, ActBF16:
		return 4 * N * C, 0, 0, 0
	case ActQ8_0:
		return 0, N * C, 4 * N * (C / 32), 0
	case ActQ8_1:
		return 0, N * C, 4 * N * (C / 32), 4 * N * (C / 32)
	case ActQ8_K:
		return 0, N * C, 4 * N * (C / 256), 4 * N * (C / 16)
	}
	return 0, 0, 0, 0
}

// QuantizeActs returns the launch that turns n rows of cols floats at x
// into form a in b. ActF32 needs none: it returns ok false.
func QuantizeActs(a Act, x DevPtr, b ActBufs, n, cols int) (l Launch, ok bool, err error) {
	switch a {
	case ActF32:
		return Launch{}, false, nil
	case ActF16, ActBF16:
		k := "muser_round_f16"
		if a == ActBF16 {
			k = "muser_round_bf16"
		}
		if err := positive(k, n, cols); err != nil {
			return Launch{}, false, err
		}
		if err := product(k, n, cols); err != nil {
			return Launch{}, false, err
		}
		l, err := launch(k, [3]int{elems256(n * cols), 1, 1}, 256, 0, p(x), p(b.X), i32(n*cols))
		return l, err == nil, err
	case ActQ8_0, ActQ8_1:
		const k = "muser_quant_q8_0"
		if err := positive(k, n, cols); err != nil {
			return Launch{}, false, err
		}
		if cols%32 != 0 {
			return Launch{}, false, shapeErr(k, "%d columns are not a multiple of 32", cols)
		}
		if err := product(k, n, cols); err != nil {
			return Launch{}, false, err
		}
		var s1 DevPtr
		if a == ActQ8_1 {
			s1 = b.Ext
		}
		l, err := launch(k, [3]int{n, min(ceilDiv(cols/32, 8), maxGridY), 1}, 256, 0, p(x), i32(n), i32(cols), p(b.Q), p(b.D), p(0), p(s1))
		return l, err == nil, err
	case ActQ8_K:
		const k = "muser_quant_q8_k"
		if err := positive(k, n, cols); err != nil {
			return Launch{}, false, err
		}
		if cols%256 != 0 {
			return Launch{}, false, shapeErr(k, "%d columns are not a multiple of 256", cols)
		}
		if err := product(k, n, cols); err != nil {
			return Launch{}, false, err
		}
		l, err := launch(k, [3]int{n, min(cols/256, maxGridY), 1}, 256, 0, p(x), i32(n), i32(cols), p(b.Q), p(b.D), p(b.Ext))
		return l, err == nil, err
	}
	return Launch{}, false, &LaunchError{Kernel: "quantize", Err: fmt.Errorf("%w: activation form %d", ErrType, a)}
}

// ---------------------------------------------------------------------------
// Matrix products.

// MatMul describes y = W·x for N token rows: W is Rows × Cols weights of
// type Type in their ggml block layout at W (the GGUF bytes, base 16-byte
// aligned), the activations are in Acts in the form ActOf(Type) (for
// ActF32, Acts.X is x itself), and Y receives N rows of Rows floats.
//
// Bias and Res, when not 0, add an epilogue to the product, for the
// launches whose Epilogue is true (the decode kernels of the integer
// types): y[t][r] = y[t][r] + Bias[r] (Bias float [Rows]; the Q, K and V
// biases, as AddBias), then y[t][r] = Res[t][r] + y[t][r] (Res float
// [N][Rows]; the residual, as Add; Res may be Y). Each is the same single
// rounding as the separate launch.
type MatMul struct {
	Type       ggml.Type
	W          DevPtr
	Rows, Cols int
	Acts       ActBufs
	Y          DevPtr
	N          int
	Bias, Res  DevPtr
}

// Epilogue reports whether Launch takes Bias and Res into the product:
// the decode kernel of an integer type (N ≤ DecodeTokens). Where it does
// not, Launch with Bias or Res set is an error, and the caller adds them
// with AddBias and Add.
func (m MatMul) Epilogue() bool {
	if m.N > DecodeTokens {
		return false
	}
	for _, t := range intTypes {
		if t.t == m.Type {
			return true
		}
	}
	return false
}

// DecodeTokens is the largest batch the decode kernels (mmv, mmfv) are
// chosen for; larger batches take the tiled kernels (mmq, mmf). Both
// compute the same bits for every batch size.
const DecodeTokens = 8

// Launch returns the launch of the product: the decode kernel for N ≤
// DecodeTokens, the tiled kernel otherwise.
func (m MatMul) Launch() (Launch, error) { return m.launch(m.N <= DecodeTokens) }

// Tiled returns the launch of the tiled kernel (mmq, mmf) for any N.
func (m MatMul) Tiled() (Launch, error) { return m.launch(false) }

// Decode returns the launch of the decode kernel (mmv, mmfv) for any N
// (it runs ceil(N/8) groups of 8 tokens).
func (m MatMul) Decode() (Launch, error) { return m.launch(true) }

func (m MatMul) launch(decode bool) (Launch, error) {
	op := "matmul " + m.Type.String()
	if (m.Bias != 0 || m.Res != 0) && !(decode && MatMul{Type: m.Type}.Epilogue()) {
		return Launch{}, shapeErr(op, "a bias or residual epilogue needs the decode kernel of an integer type")
	}
	if err := positive(op, m.Rows, m.Cols, m.N); err != nil {
		return Launch{}, err
	}
	if err := product(op, m.N, max(m.Rows, m.Cols)); err != nil {
		return Launch{}, err
	}
	for _, t := range floatTypes {
		if t.t != m.Type {
			continue
		}
		if decode {
			k := "muser_mmfv_" + t.name
			return launch(k, [3]int{ceilDiv(m.Rows, 8), ceilDiv(m.N, 8), 1}, 128, 0,
				p(m.W), i32(m.Rows), i32(m.Cols), p(m.Acts.X), p(m.Y), i32(m.N))
		}
		k := "muser_mmf_" + t.name
		return launch(k, [3]int{ceilDiv(m.Rows, 32), ceilDiv(m.N, 32), 1}, 256, 0,
			p(m.W), i32(m.Rows), i32(m.Cols), p(m.Acts.X), p(m.Y), i32(m.N))
	}
	for _, t := range intTypes {
		if t.t != m.Type {
			continue
		}
		if bs := m.Type.BlockSize(); m.Cols%bs != 0 {
			return Launch{}, shapeErr(op, "%d columns are not a multiple of the block size %d", m.Cols, bs)
		}
		if rb, _ := m.Type.RowSize(m.Cols); rb > 0 && m.Rows > math.MaxInt64/rb {
			return Launch{}, shapeErr(op, "%d rows of %d bytes overflow", m.Rows, rb)
		}
		args := []any{p(m.W), i32(m.Rows), i32(m.Cols), p(m.Acts.Q), p(m.Acts.D), p(m.Acts.Ext), p(m.Y), i32(m.N)}
		if decode {
			r := 4
			switch m.Type.BlockSize() {
			case 256:
				r = mmvKRows(m.Cols / 256)
			case 32:
				r = mmvLegacyRows(m.Cols / 32)
			}
			return launch("muser_mmv_"+t.name, [3]int{ceilDiv(m.Rows, r), ceilDiv(m.N, 8), 1}, 128, 0, append(args, p(m.Bias), p(m.Res))...)
		}
		// The tiled kernel copies weights and activations 16 bytes at a
		// time, activation scales 4.
		if m.W%16 != 0 || m.Acts.Q%16 != 0 || m.Acts.D%4 != 0 || m.Acts.Ext%16 != 0 {
			return Launch{}, shapeErr(op, "weights at %#x, activations at %#x, %#x, %#x: want 16-byte aligned (4 for the scales)",
				m.W, m.Acts.Q, m.Acts.D, m.Acts.Ext)
		}
		return launch("muser_mmq_"+t.name, [3]int{ceilDiv(m.Rows, 64), ceilDiv(m.N, 64), 1}, 128, mmqShared(m.Type), args...)
	}
	return Launch{}, &LaunchError{Kernel: op, Err: ErrType}
}

// mmqShared is the dynamic shared memory of the tiled integer product of
// weight type t (mmq.cuh's Geom<T>::DYN): per stage of SB blocks (4 of 32
// values, 2 of 64, 1 of 256), two buffers of 64 rows' raw weight bytes
// (the 16-byte chunks covering a row's SB blocks), two of 64 tokens'
// activations and one of 64 rows' decoded weights, a row of KS values
// padded by 16 bytes.
func mmqShared(t ggml.Type) int {
	qk := t.BlockSize()
	bytes, _ := t.RowSize(qk)
	sb := 1
	switch qk {
	case 32:
		sb = 4
	case 64:
		sb = 2
	}
	ksp := sb*qk + 16
	raw := (sb*bytes + 30) / 16 * 16
	return 2*64*raw + 2*64*ksp + 64*ksp
}

// mmvKRows is the number of rows a CTA of the K-quants' decode kernel
// takes (mmq.cuh's mmv_k): 16 super-blocks a chunk, in chunks of the
// fewest of 1, 2, 4, 8 or 16 super-blocks that hold a row of nb.
func mmvKRows(nb int) int {
	cb := 1
	for cb < nb && cb < 16 {
		cb *= 2
	}
	return 16 / cb
}

// mmvLegacyRows is the number of rows a CTA of the 32-value block types'
// decode kernel takes (mmq.cuh's mmv_legacy): 128 blocks a chunk, in
// chunks of the fewest of 32, 64 or 128 blocks that hold a row of nb.
func mmvLegacyRows(nb int) int {
	switch {
	case nb <= 32:
		return 4
	case nb <= 64:
		return 2
	}
	return 1
}

// Embed returns the launch that writes the embedding rows of n tokens:
// x[i] = row tokens[i] of the rows × cols matrix W of type t, decoded as
// ggml.Dequantize decodes it. tokens is int32 [n]; a token outside [0,
// rows) leaves its row of x unwritten.
func Embed(t ggml.Type, w DevPtr, rows, cols int, tokens DevPtr, n int, x DevPtr) (Launch, error) {
	op := "embed " + t.String()
	if err := positive(op, rows, cols, n); err != nil {
		return Launch{}, err
	}
	if err := product(op, n, cols); err != nil {
		return Launch{}, err
	}
	for _, list := range [][]struct {
		t    ggml.Type
		name string
	}{intTypes, floatTypes} {
		for _, e := range list {
			if e.t != t {
				continue
			}
			if cols%t.BlockSize() != 0 {
				return Launch{}, shapeErr(op, "%d columns are not a multiple of the block size %d", cols, t.BlockSize())
			}
			return launch("muser_embed_"+e.name, [3]int{n, 1, 1}, 256, 0, p(w), i32(rows), i32(cols), p(tokens), i32(n), p(x))
		}
	}
	return Launch{}, &LaunchError{Kernel: op, Err: ErrType}
}

// ---------------------------------------------------------------------------
// Per-token operations.

// RMSNorm returns the launch of dst[i] = RMSNorm(x[src])·w for i < n rows
// of cols floats, src = rowidx[i] (int32 [n]) or i when rowidx is 0. dst
// may be x when rowidx is 0.
func RMSNorm(x, rowidx, dst, w DevPtr, n, cols int, eps float32) (Launch, error) {
	return rmsNorm(x, rowidx, dst, w, n, cols, eps, ActF32, ActBufs{})
}

// RMSNormQuant is RMSNorm that also quantizes the n rows it writes into
// b, in form a, as QuantizeActs(a, dst, b, n, cols) would, in the same
// launch. a must be one FusedQuant accepts: ActQ8_0 or ActQ8_1 with cols
// a multiple of 32, ActQ8_K with cols a multiple of 256.
func RMSNormQuant(x, rowidx, dst, w DevPtr, n, cols int, eps float32, a Act, b ActBufs) (Launch, error) {
	return rmsNorm(x, rowidx, dst, w, n, cols, eps, a, b)
}

func rmsNorm(x, rowidx, dst, w DevPtr, n, cols int, eps float32, a Act, b ActBufs) (Launch, error) {
	const k = "muser_rmsnorm"
	fq, err := fusedQuant(k, a, b, n, cols)
	if err != nil {
		return Launch{}, err
	}
	return launch(k, [3]int{n, 1, 1}, 256, 0, p(x), p(rowidx), p(dst), i32(n), i32(cols), p(w), f32(eps), fq[0], fq[1], fq[2], fq[3])
}

// FusedQuant reports whether the row operations that can quantize what
// they write (RMSNormQuant, AddRMSNormQuant, SiLUMulQuant) can quantize
// into activation form a: Q8_0, Q8_1 and Q8_K.
func FusedQuant(a Act) bool { return a == ActQ8_0 || a == ActQ8_1 || a == ActQ8_K }

// fusedQuant checks the shape of a fused quantization into form a (ActF32:
// none) and returns the kernel's q, d, s1 and bsums arguments (s1 Q8_1's
// sums, bsums Q8_K's; the kernels tell Q8_K by bsums not null).
func fusedQuant(k string, a Act, b ActBufs, n, cols int) ([4]any, error) {
	if err := positive(k, n, cols); err != nil {
		return [4]any{}, err
	}
	if err := product(k, n, cols); err != nil {
		return [4]any{}, err
	}
	block := 32
	if a == ActQ8_K {
		block = 256
	}
	switch {
	case a == ActF32:
		return [4]any{p(0), p(0), p(0), p(0)}, nil
	case !FusedQuant(a):
		return [4]any{}, &LaunchError{Kernel: k, Err: fmt.Errorf("%w: activation form %d is not quantized in the normalization", ErrType, a)}
	case cols%block != 0:
		return [4]any{}, shapeErr(k, "%d columns are not a multiple of %d", cols, block)
	}
	var s1, bsums DevPtr
	switch a {
	case ActQ8_1:
		s1 = b.Ext
	case ActQ8_K:
		bsums = b.Ext
	}
	return [4]any{p(b.Q), p(b.D), p(s1), p(bsums)}, nil
}

// AddRMSNorm returns the launch of the step after the attention output
// product: o += bias (when bias is not 0), x += o, dst = RMSNorm(x)·w, for
// n rows of cols floats. dst may be o.
func AddRMSNorm(x, o, bias, w, dst DevPtr, n, cols int, eps float32) (Launch, error) {
	return addRMSNorm(x, o, bias, w, dst, n, cols, eps, ActF32, ActBufs{})
}

// AddRMSNormQuant is AddRMSNorm that also quantizes dst into b in form a
// (as RMSNormQuant).
func AddRMSNormQuant(x, o, bias, w, dst DevPtr, n, cols int, eps float32, a Act, b ActBufs) (Launch, error) {
	return addRMSNorm(x, o, bias, w, dst, n, cols, eps, a, b)
}

func addRMSNorm(x, o, bias, w, dst DevPtr, n, cols int, eps float32, a Act, b ActBufs) (Launch, error) {
	const k = "muser_add_rmsnorm"
	fq, err := fusedQuant(k, a, b, n, cols)
	if err != nil {
		return Launch{}, err
	}
	return launch(k, [3]int{n, 1, 1}, 256, 0, p(x), p(o), p(bias), p(w), p(dst), i32(n), i32(cols), f32(eps), fq[0], fq[1], fq[2], fq[3])
}

// RMSNormHeads returns the launch that normalizes every head of n rows in
// place with the weights w (dim floats): head h of row i is dim floats at
// x + (i·stride + h·dim)·4.
func RMSNormHeads(x DevPtr, n, heads, dim, stride int, w DevPtr, eps float32) (Launch, error) {
	const k = "muser_rmsnorm_heads"
	if err := positive(k, n, heads, dim, stride); err != nil {
		return Launch{}, err
	}
	if heads > maxGridY || heads*dim > stride {
		return Launch{}, shapeErr(k, "%d heads of %d in rows of %d", heads, dim, stride)
	}
	return launch(k, [3]int{n, heads, 1}, 32, 0, p(x), i32(n), i32(heads), i32(dim), i32(stride), p(w), f32(eps))
}

// Add returns the launch of dst[i] = a[i] + b[i] for i < count.
func Add(a, b, dst DevPtr, count int) (Launch, error) {
	const k = "muser_add"
	if err := positive(k, count); err != nil {
		return Launch{}, err
	}
	return launch(k, [3]int{elems256(count), 1, 1}, 256, 0, p(a), p(b), p(dst), i32(count))
}

// AddBias returns the launch of x[t][c] += bias[c] for n rows of cols.
func AddBias(x, bias DevPtr, n, cols int) (Launch, error) {
	const k = "muser_add_bias"
	if err := positive(k, n, cols); err != nil {
		return Launch{}, err
	}
	if err := product(k, n, cols); err != nil {
		return Launch{}, err
	}
	return launch(k, [3]int{elems256(n * cols), 1, 1}, 256, 0, p(x), p(bias), i32(n), i32(cols))
}

// SiLUMul returns the launch of dst[i] = silu(gate[i])·up[i] (kernels.SiLUMul).
func SiLUMul(gate, up, dst DevPtr, count int) (Launch, error) {
	const k = "muser_silu_mul"
	if err := positive(k, count); err != nil {
		return Launch{}, err
	}
	return launch(k, [3]int{elems256(count), 1, 1}, 256, 0, p(gate), p(up), p(dst), i32(count))
}

// SiLUMulQuant returns the launch of SiLUMul on n rows of cols floats
// that also quantizes the rows of dst into b in form a, as
// QuantizeActs(a, dst, b, n, cols) would (a and cols as RMSNormQuant
// allows).
func SiLUMulQuant(gate, up, dst DevPtr, n, cols int, a Act, b ActBufs) (Launch, error) {
	const k = "muser_silu_mul_quant"
	if a == ActF32 {
		return Launch{}, &LaunchError{Kernel: k, Err: fmt.Errorf("%w: no activation form to quantize into", ErrType)}
	}
	fq, err := fusedQuant(k, a, b, n, cols)
	if err != nil {
		return Launch{}, err
	}
	return launch(k, [3]int{n, min(ceilDiv(cols, 256), maxGridY), 1}, 256, 0, p(gate), p(up), p(dst), i32(n), i32(cols), fq[0], fq[1], fq[2], fq[3])
}

// RoPE returns the launch that rotates the first ropeDim dimensions of
// every head of n rows in place (NeoX pairing when neox), with the cos and
// sin table cs: float [n][ropeDim], pair k of row t at cs[t·ropeDim + 2k]
// (cos) and cs[t·ropeDim + 2k + 1] (sin), as the engine computes it.
func RoPE(x DevPtr, n, heads, dim, stride, ropeDim int, neox bool, cs DevPtr) (Launch, error) {
	const k = "muser_rope"
	if err := positive(k, n, heads, dim, stride, ropeDim); err != nil {
		return Launch{}, err
	}
	if ropeDim%2 != 0 || ropeDim > dim || heads*dim > stride {
		return Launch{}, shapeErr(k, "rope dim %d, %d heads of %d in rows of %d", ropeDim, heads, dim, stride)
	}
	return launch(k, [3]int{n, 1, 1}, 256, 0, p(x), i32(n), i32(heads), i32(dim), i32(stride), i32(ropeDim), flag(neox), p(cs))
}

// KVStore returns the launch that writes n rows of K and V (kvrow floats
// each) to their sequences' caches: row i to position pos[i] of the caches
// at kc[i] and vc[i] (uint64 [n] device addresses of the layer's caches;
// pos int32 [n]), converted to f16 when f16 (ggml.F32ToF16).
func KVStore(f16 bool, k, v DevPtr, n, kvrow int, kc, vc, pos DevPtr) (Launch, error) {
	name := "muser_kv_store_f32"
	if f16 {
		name = "muser_kv_store_f16"
	}
	if err := positive(name, n, kvrow); err != nil {
		return Launch{}, err
	}
	return launch(name, [3]int{n, 1, 1}, 256, 0, p(k), p(v), i32(n), i32(kvrow), p(kc), p(vc), p(pos))
}

// RoPEKVStore describes the end of a layer's Q, K and V for N rows in
// one launch: RoPE of Q (Heads heads of Dim, rows Heads·Dim apart) and of
// K (KVHeads heads, rows KVHeads·Dim apart) in place with the cos/sin
// table CS (as RoPE: RopeDim dimensions, NeoX pairing when NeoX), then
// KVStore(F16, K, V, N, KVHeads·Dim, KC, VC, Pos). It computes and
// writes what those three launches do, and with F16 it also rounds the
// rotated Q to f16 values in place (kernels.RoundF16s), as the attention
// takes them: its scores kernels round the queries again, which then
// changes nothing and costs a test.
type RoPEKVStore struct {
	F16                 bool
	Q, K, V             DevPtr
	N                   int
	Heads, KVHeads, Dim int
	RopeDim             int
	NeoX                bool
	CS, KC, VC, Pos     DevPtr
}

// Launch returns the launch.
func (r RoPEKVStore) Launch() (Launch, error) {
	const k = "muser_rope_kv_store"
	if err := positive(k, r.N, r.Heads, r.KVHeads, r.Dim, r.RopeDim); err != nil {
		return Launch{}, err
	}
	if r.RopeDim%2 != 0 || r.RopeDim > r.Dim {
		return Launch{}, shapeErr(k, "rope dim %d of heads of %d", r.RopeDim, r.Dim)
	}
	if err := product(k, r.N, max(r.Heads, r.KVHeads)*r.Dim); err != nil {
		return Launch{}, err
	}
	return launch(k, [3]int{r.N, 1, 1}, 256, 0, p(r.Q), p(r.K), p(r.V), i32(r.N), i32(r.Heads), i32(r.KVHeads),
		i32(r.Dim), i32(r.RopeDim), flag(r.NeoX), p(r.CS), p(r.KC), p(r.VC), p(r.Pos), flag(r.F16))
}

// RoPEAttention is RoPEKVStore followed by the Attention of a decode
// batch in one launch (Fits: rows that attend to at most AttnFusedMax
// positions, heads of at most AttnFusedDim dimensions). The rows of one
// sequence must be a run of consecutive rows at consecutive positions, at
// most AttnFusedRun of them, whose sequence's earlier positions are all
// in its cache; First (int32 [N]) holds each row's run's first row (a
// row alone is its own first). It writes what those launches write but
// the rotated Q and K (the cache's copy of K is written; Q and K stay as
// the products left them): the output to Out, the K and V rows to the
// caches, and where OutAct is ActQ8_0 or ActQ8_1 the output's activations
// to OutQ, as Attention.OutAct. MaxPos is the largest of the rows'
// positions.
type RoPEAttention struct {
	RoPEKVStore
	First  DevPtr
	Out    DevPtr
	MaxPos int
	OutAct Act
	OutQ   ActBufs
}

// The fused decode attention's bounds (ropeattn.cuh's attn::DSM, attn::DMX,
// attn::DRN and attn::DTH): the most positions a row attends to, the
// largest head dimension, the most rows of a run, the threads of a block.
const (
	AttnFusedMax     = 4096
	AttnFusedDim     = 128
	AttnFusedRun     = 16
	attnFusedThreads = 512
)

// Fits reports whether a's shape is one the fused kernel takes: rows that
// attend to at most AttnFusedMax positions, heads of at most AttnFusedDim
// dimensions, a rotation, and an output kept in float32 or quantized as
// Attention.QuantizesOut allows. Whether each sequence's rows are a run
// (First) is the caller's to know.
func (a RoPEAttention) Fits() bool {
	out := a.OutAct == ActF32 || quantizesHeads(a.OutAct, a.Dim)
	return a.MaxPos >= 0 && a.MaxPos < AttnFusedMax && a.Dim <= AttnFusedDim && a.RopeDim > 0 && out
}

// Launch returns the launch: grid (Heads, N), block 512.
func (a RoPEAttention) Launch() (Launch, error) {
	k := "muser_rope_attn_f32"
	if a.F16 {
		k = "muser_rope_attn_f16"
	}
	if err := positive(k, a.N, a.Heads, a.KVHeads, a.Dim, a.RopeDim); err != nil {
		return Launch{}, err
	}
	if a.Heads%a.KVHeads != 0 || a.RopeDim%2 != 0 || a.RopeDim > a.Dim || !a.Fits() {
		return Launch{}, shapeErr(k, "%d heads over %d KV heads of dim %d (at most %d), rope dim %d, max position %d (below %d), output %s",
			a.Heads, a.KVHeads, a.Dim, AttnFusedDim, a.RopeDim, a.MaxPos, AttnFusedMax, a.OutAct)
	}
	if err := product(k, a.N, a.Heads*a.Dim); err != nil {
		return Launch{}, err
	}
	if a.First == 0 {
		return Launch{}, shapeErr(k, "the fused attention needs the rows' runs (First)")
	}
	var q, d, s1 DevPtr
	if a.OutAct != ActF32 {
		q, d = a.OutQ.Q, a.OutQ.D
		if a.OutAct == ActQ8_1 {
			s1 = a.OutQ.Ext
		}
	}
	return launch(k, [3]int{a.Heads, a.N, 1}, attnFusedThreads, 0, p(a.Q), p(a.K), p(a.V), i32(a.Heads),
		i32(a.KVHeads), i32(a.Dim), i32(a.RopeDim), flag(a.NeoX), p(a.CS), p(a.KC), p(a.VC), p(a.Pos), p(a.First),
		p(a.Out), f32(AttnScale(a.Dim)), p(q), p(d), p(s1))
}

// ---------------------------------------------------------------------------
// Attention.

// Attention shapes (attention.cuh's namespace attn): queries per thread
// block, keys per scores block, the padded rows of the staged tiles, the
// floats the scores kernel may stage, positions per weighted-sum tile and
// dimensions per weighted-sum block.
const (
	attnQB    = 64
	attnSKB   = 64
	attnSKBN  = 4 // the most blocks of keys a thread block of the tiled scores kernel takes
	attnSLD   = 68
	attnSMemF = 12288
	attnWKT   = 32
	attnWDB   = 64
	attnWLD   = 68
	attnRSP   = 1024 // positions per block of the decode softmax
	attnRCH   = 256  // positions per part of the weighted sum (kernels.AttnPart)
	attnRWT   = 288  // threads of the decode weighted sum
	attnWGrid = 256  // thread blocks the decode weighted sum spreads a row's parts to fill

	attnRowsScoresDim = 128 // the largest head dimension of the decode scores kernel
)

// attnScoresBlocksPer is how many blocks of 64 keys one thread block of
// the tiled scores kernel takes (its nkb), for a grid of ctas thread
// blocks at one block of keys each: up to 4, which stages a block's
// queries once for four blocks of keys, while the grid keeps at least
// about 2,048 thread blocks (8 waves of an H100's 132 multiprocessors at
// 2 blocks each; the blocks past a tile's last position return at once).
func attnScoresBlocksPer(ctas int) int { return max(1, min(attnSKBN, ctas/2048)) }

// attnWPartsPer is how many of a row's np parts (attnRCH positions each)
// one thread block of the decode weighted sum walks, for a grid of ctas
// thread blocks at all of a row's parts each: all of them where that grid
// already has attnWGrid thread blocks (an H100's 132 multiprocessors at
// 2 blocks each, about one wave), else as many as spread the parts over
// about attnWGrid. Where a row's parts need several thread blocks, their
// sums go through Y to muser_attn_wsum_parts. It never changes a result.
func attnWPartsPer(ctas, np int) int {
	ng := min(np, max(1, attnWGrid/ctas))
	return ceilDiv(np, ng)
}

// MaxAttnDim is the largest head dimension the attention kernels take.
const MaxAttnDim = 352

// attnScoresShared is the scores kernel's dynamic shared memory in bytes
// for head dimension dim (attention.cuh's attn_groups and attn_rows4).
func attnScoresShared(dim int) int {
	per := 2 * ((dim + 3) / 4) * attnSLD
	g := 1
	switch {
	case 4*per <= attnSMemF:
		g = 4
	case 2*per <= attnSMemF:
		g = 2
	}
	return g * per * 4
}

// AttnQueries returns how many queries one attention thread block takes
// for head dimension dim: the tiles of AttnTiles hold at most
// AttnQueries(dim)/min(group, AttnQueries(dim)) rows.
func AttnQueries(dim int) int { return attnQB }

// AttnScale returns the attention scale the engine uses, float32(1/√dim).
func AttnScale(dim int) float32 { return float32(1 / math.Sqrt(float64(dim))) }

// AttnTiles cuts a batch of attention rows into tiles: runs of consecutive
// rows of one sequence (the same K cache address kc[i]) with consecutive
// positions, of at most AttnQueries(dim)/gh rows, gh = min(group,
// AttnQueries(dim)). It returns the row boundaries: tile t is rows
// tiles[t] .. tiles[t+1]-1. How rows are cut never changes a result; it
// only decides how often each K and V row is read.
func AttnTiles(kc []uint64, pos []int32, heads, kvheads, dim int) []int32 {
	if len(kc) == 0 || heads < 1 || kvheads < 1 || dim < 1 || dim > MaxAttnDim {
		return nil
	}
	qc := AttnQueries(dim)
	gh := min(heads/kvheads, qc)
	per := max(1, qc/max(gh, 1))
	tiles := []int32{0}
	lo := 0
	for i := 1; i <= len(kc); i++ {
		if i == len(kc) || i-lo >= per || kc[i] != kc[lo] || pos[i] != pos[i-1]+1 {
			tiles = append(tiles, int32(i))
			lo = i
		}
	}
	return tiles
}

// Attention describes one layer's attention over a batch of N rows (the
// ABI of attention.cuh): Q and Out are float [N][Heads·Dim]; KC and VC
// are uint64 [N] device addresses of each row's sequence's K and V cache
// for this layer (f16 when F16, else f32; position p at element
// p·KVHeads·Dim), Pos int32 [N] the rows' positions (their K and V
// already stored), Tiles int32 [NTiles+1] from AttnTiles, MaxPos the
// largest position; S is float scratch [N][Heads][LD], LD > MaxPos. M is
// scratch of MBytes() bytes, always required: each row and head's maximum
// score per 64 keys (float [N][Heads][AttnMaxBlocks(LD)]) and, for a
// batch whose tiles are single rows (NTiles = N, decode), the decode
// softmax's float64 sums per block of 1,024 positions after them, then
// the weighted sum's sums per part of 256 positions. Inv, float scratch
// [N·Heads], the softmax's 1/sum, is the tiled kernels': required unless
// every tile is one row.
type Attention struct {
	F16                 bool
	Heads, KVHeads, Dim int
	N                   int
	Q, Out              DevPtr
	KC, VC, Pos, Tiles  DevPtr
	NTiles, MaxPos      int
	S                   DevPtr
	LD                  int
	M, Inv              DevPtr
	// KeyBlocks, if positive, is how many blocks of 64 keys one thread
	// block of the tiled scores kernel takes (at most 4); zero lets the
	// grid's size decide. It never changes a result.
	KeyBlocks int
	// Parts, if positive, is how many of a row's parts of 256 positions
	// one thread block of the decode weighted sum walks; zero lets the
	// grid's size decide (attnWPartsPer). It never changes a result.
	Parts int
	// OutAct, when not ActF32, has a decode batch's attention (QuantizesOut)
	// also quantize Out into OutQ in that form, as QuantizeActs(OutAct,
	// Out, OutQ, N, Heads·Dim) would: the last launch
	// (muser_attn_wsum_parts, launched for it where the weighted sums
	// would not need it) quantizes each head's outputs.
	OutAct Act
	OutQ   ActBufs
}

// QuantizesOut reports whether Launches can quantize the output into form
// act (Attention.OutAct): a decode batch (every tile one row), Q8_0 or
// Q8_1, the head dimension a multiple of 32.
func (a Attention) QuantizesOut(act Act) bool {
	return a.NTiles == a.N && quantizesHeads(act, a.Dim)
}

// quantizesHeads reports whether an attention kernel can write its output
// as act's blocks a head at a time: Q8_0 or Q8_1 blocks of 32 values,
// whole within heads of dim.
func quantizesHeads(act Act, dim int) bool {
	return (act == ActQ8_0 || act == ActQ8_1) && dim%32 == 0
}

// AttnMaxBlocks is the row of Attention.M's maxima for scores of row ld:
// one maximum per block of 64 keys (attention.cuh's attn_mb).
func AttnMaxBlocks(ld int) int { return ceilDiv(ld, attnSKB) }

// attnParts is the row of the decode softmax's sums for scores of row ld:
// one per block of 1,024 positions.
func attnParts(ld int) int { return ceilDiv(ld, attnRSP) }

// attnWParts is the row of the decode weighted sum's part sums for scores
// of row ld: one per part of 256 positions.
func attnWParts(ld int) int { return ceilDiv(ld, attnRCH) }

// attnPartsAt is the byte offset of the decode softmax's sums in
// Attention.M: after the maxima, 8-byte aligned.
func attnPartsAt(n, heads, ld int) int64 {
	return (4*int64(n)*int64(heads)*int64(AttnMaxBlocks(ld)) + 7) &^ 7
}

// attnYAt is the byte offset of the decode weighted sum's part sums in
// Attention.M: after the softmax's sums.
func attnYAt(n, heads, ld int) int64 {
	return attnPartsAt(n, heads, ld) + 8*int64(n)*int64(heads)*int64(attnParts(ld))
}

// MBytes is the size in bytes of a's scratch M, from N, Heads, Dim, LD
// and whether every tile is one row (NTiles = N): the maxima, and for
// such a batch the decode softmax's sums and the weighted sum's part
// sums after them.
func (a Attention) MBytes() int64 {
	if a.NTiles != a.N {
		return attnPartsAt(a.N, a.Heads, a.LD)
	}
	return attnYAt(a.N, a.Heads, a.LD) + 4*int64(a.N)*int64(a.Heads)*int64(attnWParts(a.LD))*int64(a.Dim)
}

// Launches returns the launches of the attention, to run in order: the
// scores, the softmax (with an f16 cache, weights rounded to f16), the
// weighted sum of V rows, and for a decode batch whose rows' parts are
// spread over several thread blocks or whose output is quantized
// (OutAct), the addition of their sums (and the quantization). Both
// scores kernels write the maxima per 64 keys to M. A batch whose tiles
// are all single rows (decode) gets the kernels made for few rows
// (muser_attn_scores_rows_* up to head dimension 128;
// muser_attn_softmax_part writing the exponentials and their sums per
// 1,024 positions; muser_attn_wsum_rows_* forming 1/sum from those sums
// and scaling and rounding the weights as it stages them, its parts
// spread over thread blocks, then muser_attn_wsum_parts where they
// were), any other the tiled ones (muser_attn_scores_*,
// muser_attn_softmax8 writing the exponentials and Inv, muser_attn_wsum_*
// scaling and rounding the weights as it stages them); both compute the
// same bits.
func (a Attention) Launches() ([]Launch, error) {
	sk, wk, rk := "muser_attn_scores_f32", "muser_attn_wsum_f32", "muser_attn_wsum_rows_f32"
	srk := "muser_attn_scores_rows_f32"
	if a.F16 {
		sk, wk, rk = "muser_attn_scores_f16", "muser_attn_wsum_f16", "muser_attn_wsum_rows_f16"
		srk = "muser_attn_scores_rows_f16"
	}
	if err := positive(sk, a.Heads, a.KVHeads, a.Dim, a.N, a.NTiles, a.LD); err != nil {
		return nil, err
	}
	if a.Heads%a.KVHeads != 0 || a.Dim > MaxAttnDim || a.MaxPos < 0 || a.LD <= a.MaxPos || a.NTiles > a.N {
		return nil, shapeErr(sk, "%d heads over %d KV heads of dim %d (at most %d), %d tiles of %d rows, max position %d, ld %d",
			a.Heads, a.KVHeads, a.Dim, MaxAttnDim, a.NTiles, a.N, a.MaxPos, a.LD)
	}
	if err := product(sk, a.N, a.Heads*a.LD); err != nil {
		return nil, err
	}
	tiled := a.NTiles != a.N
	if a.M == 0 {
		return nil, shapeErr(sk, "attention needs the scratch M")
	}
	if tiled && a.OutAct != ActF32 {
		return nil, shapeErr(sk, "only a decode batch's attention quantizes its output")
	}
	if tiled && a.Inv == 0 {
		return nil, shapeErr(sk, "tiles of several rows need the scratch Inv")
	}
	qc := AttnQueries(a.Dim)
	group := a.Heads / a.KVHeads
	gh := min(group, qc)
	hy := a.KVHeads * ceilDiv(group, gh)
	blocks := ceilDiv(a.MaxPos+1, attnSKB)
	nkb := attnScoresBlocksPer(a.NTiles * hy * blocks)
	if a.KeyBlocks > 0 {
		nkb = min(a.KeyBlocks, attnSKBN)
	}
	ls := make([]Launch, 3, 4)
	var err error
	ls[0], err = launch(sk, [3]int{a.NTiles, hy, ceilDiv(blocks, nkb)}, 256, attnScoresShared(a.Dim),
		p(a.Q), i32(a.Heads), i32(a.KVHeads), i32(a.Dim), p(a.KC), p(a.Pos), p(a.Tiles), p(a.S), p(a.M), i32(a.LD),
		f32(AttnScale(a.Dim)), i32(nkb))
	if err != nil {
		return nil, err
	}
	if !tiled {
		return a.rowsLaunches(ls, srk, rk)
	}
	// Tiled: the softmax reads the maxima from M and leaves the
	// exponentials in S and 1/sum in Inv; the weighted sums scale (and
	// round) the weights as they stage them.
	ls[1], err = launch("muser_attn_softmax8", [3]int{ceilDiv(a.N*a.Heads, 32), 1, 1}, 256, 0,
		p(a.S), p(a.M), p(a.Inv), i32(a.LD), p(a.Pos), i32(a.N), i32(a.Heads))
	if err != nil {
		return nil, err
	}
	ls[2], err = launch(wk, [3]int{a.NTiles, hy, ceilDiv(a.Dim, attnWDB)}, 128, 2*attnWKT*(attnWDB+attnWLD)*4,
		p(a.S), p(a.Inv), i32(a.LD), p(a.VC), p(a.Pos), p(a.Tiles), p(a.Out), i32(a.Heads), i32(a.KVHeads), i32(a.Dim))
	if err != nil {
		return nil, err
	}
	return ls, nil
}

// rowsLaunches completes ls, whose first is the tiled scores kernel, for
// a batch whose tiles are all single rows (decode): the scores kernel
// made for few rows where the head dimension allows it, the softmax's
// exponentials over blocks of 1,024 positions per row and head with their
// sums, and the weighted sums — a thread per output chain, 8 heads × 8
// dimensions and a row's parts (or pc of them) a block, fed by staging
// warps, which first form 1/sum from those sums (checked against the
// float64 chains) — then, where a row's parts were spread over several
// blocks or where the output is quantized, the addition of their sums
// and the quantization.
func (a Attention) rowsLaunches(ls []Launch, srk, rk string) ([]Launch, error) {
	group := a.Heads / a.KVHeads
	var err error
	if a.Dim <= attnRowsScoresDim {
		// A thread per key and up to 8 heads (the tiled kernel's
		// 64-query blocks would hold a group's few).
		ls[0], err = launch(srk, [3]int{ceilDiv(a.MaxPos+1, 128), a.N, a.KVHeads * ceilDiv(group, 8)}, 128, 0,
			p(a.Q), i32(a.Heads), i32(a.KVHeads), i32(a.Dim), p(a.KC), p(a.Pos), p(a.S), p(a.M), i32(a.LD),
			f32(AttnScale(a.Dim)))
		if err != nil {
			return nil, err
		}
	}
	part := a.M + DevPtr(attnPartsAt(a.N, a.Heads, a.LD))
	if ls[1], err = softmaxPart(a.S, a.M, part, a.Pos, a.LD, a.N, a.Heads, a.MaxPos); err != nil {
		return nil, err
	}
	y := a.M + DevPtr(attnYAt(a.N, a.Heads, a.LD))
	hy, dz := a.KVHeads*ceilDiv(group, 8), ceilDiv(a.Dim, 8)
	np := ceilDiv(a.MaxPos+1, attnRCH) // the most parts of a row
	pc := attnWPartsPer(a.N*hy*dz, np)
	if a.Parts > 0 {
		pc = min(a.Parts, np)
	}
	ng := ceilDiv(np, pc)
	ls[2], err = launch(rk, [3]int{a.N * ng, hy, dz}, attnRWT, 0,
		p(a.S), p(part), i32(a.LD), i32(attnParts(a.LD)), p(a.VC), p(a.Pos), p(a.Out), p(y),
		i32(attnWParts(a.LD)), i32(pc), i32(ng), i32(a.Heads), i32(a.KVHeads), i32(a.Dim))
	if err != nil {
		return nil, err
	}
	var q, d, s1 DevPtr
	if a.OutAct != ActF32 {
		if !a.QuantizesOut(a.OutAct) {
			return nil, shapeErr(rk, "the attention output quantizes into q8_0 or q8_1 with a head dimension a multiple of 32, not %s with dimension %d", a.OutAct, a.Dim)
		}
		q, d = a.OutQ.Q, a.OutQ.D
		if a.OutAct == ActQ8_1 {
			s1 = a.OutQ.Ext
		}
	} else if ng == 1 {
		return ls, nil
	}
	l, err := launch("muser_attn_wsum_parts", [3]int{a.Heads, a.N, 1}, 256, 0,
		p(y), p(a.Pos), p(a.Out), i32(a.Heads), i32(a.Dim), i32(attnWParts(a.LD)), i32(pc), p(q), p(d), p(s1))
	if err != nil {
		return nil, err
	}
	return append(ls, l), nil
}

// softmaxPart is the launch of muser_attn_softmax_part over n rows of
// heads heads whose positions are at most maxPos: the exponentials in S,
// their sums per block of 1,024 positions in part (attnParts(ld) a row
// and head), the maxima read from M.
func softmaxPart(S, M, part, pos DevPtr, ld, n, heads, maxPos int) (Launch, error) {
	const k = "muser_attn_softmax_part"
	if err := positive(k, ld, n, heads); err != nil {
		return Launch{}, err
	}
	if maxPos < 0 || ld <= maxPos {
		return Launch{}, shapeErr(k, "max position %d, ld %d", maxPos, ld)
	}
	if err := product(k, n, heads*ld); err != nil {
		return Launch{}, err
	}
	return launch(k, [3]int{ceilDiv(maxPos+1, attnRSP), n, heads}, 256, 0,
		p(S), p(M), p(part), i32(ld), i32(attnParts(ld)), p(pos), i32(heads))
}

// ---------------------------------------------------------------------------
// Self-test kernels (the GPU tests' probes of the device primitives).

// SelfTestExp32 returns the launch of y[i] = Exp32(x[i]) for i < count.
func SelfTestExp32(x, y DevPtr, count int) (Launch, error) {
	const k = "muser_test_exp32"
	if err := positive(k, count); err != nil {
		return Launch{}, err
	}
	return launch(k, [3]int{elems256(count), 1, 1}, 256, 0, p(x), p(y), i32(count))
}

// SelfTestF32Bits returns the launch that converts the float32 values with
// bits base+i, i < count: f16 (uint16 [count], ggml.F32ToF16), bf16
// (uint16, ggml.F32ToBF16), ra (int8, kernels' roundAway), ni (int32,
// kernels' nearestInt), r16 and ru (float32, the attention's roundings of
// its queries and of its weights, both ggml.F16ToF32(ggml.F32ToF16), ru's
// NaN payloads free).
func SelfTestF32Bits(base uint32, count int, f16, bf16, ra, ni, r16, ru DevPtr) (Launch, error) {
	const k = "muser_test_f32_bits"
	if err := positive(k, count); err != nil {
		return Launch{}, err
	}
	return launch(k, [3]int{elems256(count), 1, 1}, 256, 0, base, i32(count), p(f16), p(bf16), p(ra), p(ni), p(r16), p(ru))
}

// SelfTestDecodeSoftmax returns the decode attention's softmax alone, as
// two launches to run in order: muser_attn_softmax_part, then
// muser_test_softmax_weights, which forms float32(1/sum) as the decode
// weighted sum does and writes the weights. For each row i < n and head h
// < heads, the scores S[(i·heads + h)·ld + j], j ≤ pos[i] ≤ maxPos, are
// replaced in place by kernels.Softmax of them, rounded to f16 when round
// is set. M is scratch of the MBytes of n decode rows of heads heads and
// scores of row ld (Attention{Heads: heads, Dim: 1, N: n, NTiles: n, LD:
// ld}) whose maxima the caller has filled: M[(i·heads + h)·
// AttnMaxBlocks(ld) + b] the maximum of the scores 64·b .. 64·b+63 (those
// ≤ pos[i]).
func SelfTestDecodeSoftmax(S, M, pos DevPtr, ld, n, heads, maxPos int, round bool) ([2]Launch, error) {
	var ls [2]Launch
	part := M + DevPtr(attnPartsAt(n, heads, ld))
	var err error
	if ls[0], err = softmaxPart(S, M, part, pos, ld, n, heads, maxPos); err != nil {
		return ls, err
	}
	ls[1], err = launch("muser_test_softmax_weights", [3]int{n, heads, 1}, 32, 0,
		p(S), p(part), i32(ld), i32(attnParts(ld)), p(pos), i32(heads), flag(round))
	return ls, err
}

// SelfTestSmallTables returns the launch that fills f16 and f16a (float
// [65536]: ggml.F16ToF32 of every f16, by the definition and by the
// conversion instruction) and ue (float [256], NVFP4's UE4M3 scales
// halved).
func SelfTestSmallTables(f16, f16a, ue DevPtr) (Launch, error) {
	return launch("muser_test_small_tables", [3]int{256, 1, 1}, 256, 0, p(f16), p(f16a), p(ue))
}
