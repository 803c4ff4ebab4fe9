package cukernels

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/kernels"
)

// sampleLaunches returns one launch of every kernel from its builder, for
// TestArtifacts to check their arguments against the PTX.
func sampleLaunches(t *testing.T) []Launch {
	t.Helper()
	var ls []Launch
	add := func(l Launch, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	b := ActBufs{X: 0x1000, Q: 0x2000, D: 0x3000, Ext: 0x4000}
	for _, a := range []Act{ActF16, ActBF16, ActQ8_0, ActQ8_K} {
		l, ok, err := QuantizeActs(a, 0x100, b, 3, 512)
		if !ok {
			t.Fatalf("QuantizeActs(%d) launched nothing", a)
		}
		add(l, err)
	}
	for _, e := range intTypes {
		m := MatMul{Type: e.t, W: 0x10, Rows: 100, Cols: 512, Acts: b, Y: 0x20, N: 3}
		add(m.Decode())
		add(m.Tiled())
		add(Embed(e.t, 0x10, 100, 512, 0x30, 3, 0x40))
	}
	for _, e := range floatTypes {
		m := MatMul{Type: e.t, W: 0x10, Rows: 100, Cols: 500, Acts: b, Y: 0x20, N: 3}
		add(m.Decode())
		add(m.Tiled())
		add(Embed(e.t, 0x10, 100, 500, 0x30, 3, 0x40))
	}
	add(RMSNorm(1, 2, 3, 4, 5, 896, 1e-6))
	add(AddRMSNorm(1, 2, 3, 4, 5, 6, 896, 1e-6))
	add(RMSNormHeads(1, 5, 14, 64, 896, 2, 1e-6))
	add(Add(1, 2, 3, 100))
	add(AddBias(1, 2, 5, 896))
	add(SiLUMul(1, 2, 3, 100))
	add(SiLUMulQuant(1, 2, 3, 5, 4864, ActQ8_0, b))
	add(RMSNormQuant(1, 2, 3, 4, 5, 896, 1e-6, ActQ8_1, b))
	add(AddRMSNormQuant(1, 2, 3, 4, 5, 6, 896, 1e-6, ActQ8_0, b))
	add(MatMul{Type: ggml.TypeQ8_0, W: 0x10, Rows: 100, Cols: 512, Acts: b, Y: 0x20, N: 3, Bias: 0x50, Res: 0x20}.Launch())
	add(RoPE(1, 5, 14, 64, 896, 64, true, 2))
	add(KVStore(true, 1, 2, 5, 128, 3, 4, 5))
	add(KVStore(false, 1, 2, 5, 128, 3, 4, 5))
	add(RoPEKVStore{F16: true, Q: 1, K: 2, V: 3, N: 5, Heads: 14, KVHeads: 2, Dim: 64, RopeDim: 64, NeoX: true, CS: 4, KC: 5, VC: 6, Pos: 7}.Launch())
	for _, f16 := range []bool{true, false} {
		add(RoPEAttention{RoPEKVStore: RoPEKVStore{F16: f16, Q: 1, K: 2, V: 3, N: 5, Heads: 14, KVHeads: 2, Dim: 64,
			RopeDim: 64, CS: 4, KC: 5, VC: 6, Pos: 7}, First: 9, Out: 8, MaxPos: 100, OutAct: ActQ8_0, OutQ: b}.Launch())
	}
	for _, f16 := range []bool{true, false} {
		for _, ntiles := range []int{2, 5} { // tiled; every tile one row (decode)
			a := Attention{F16: f16, Heads: 14, KVHeads: 2, Dim: 64, N: 5, Q: 1, Out: 2, KC: 3, VC: 4, Pos: 5, Tiles: 6,
				NTiles: ntiles, MaxPos: 100, S: 7, LD: 104, M: 8, Inv: 9}
			al, err := a.Launches()
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, al...)
		}
	}
	// A decode row's parts over several thread blocks: the parts' addition.
	al, err := Attention{F16: true, Heads: 14, KVHeads: 2, Dim: 64, N: 1, Q: 1, Out: 2, KC: 3, VC: 4, Pos: 5, Tiles: 6,
		NTiles: 1, MaxPos: 1000, S: 7, LD: 1004, M: 8, Parts: 1}.Launches()
	if err != nil || len(al) != 4 {
		t.Fatalf("decode launches with Parts 1: %d, %v; want 4", len(al), err)
	}
	ls = append(ls, al[3])
	add(SelfTestExp32(1, 2, 100))
	add(SelfTestF32Bits(0x3f800000, 100, 1, 2, 3, 4, 5, 6))
	add(SelfTestSmallTables(1, 2, 3))
	sm, err := SelfTestDecodeSoftmax(1, 2, 3, 104, 5, 14, 100, true)
	if err != nil {
		t.Fatal(err)
	}
	ls = append(ls, sm[:]...)
	return ls
}

func TestSampleLaunchesCoverEveryKernel(t *testing.T) {
	seen := map[string]bool{}
	for _, l := range sampleLaunches(t) {
		seen[l.Kernel] = true
	}
	for _, k := range kernelTable {
		if !seen[k.Name] {
			t.Errorf("no builder launches %s", k.Name)
		}
	}
}

func TestMatMulLaunch(t *testing.T) {
	b := ActBufs{Q: 0x100, D: 0x204, Ext: 0x300, X: 0x400}
	tests := []struct {
		name   string
		m      MatMul
		kernel string
		grid   [3]uint32
		block  uint32
		shared uint32
	}{
		{"q8_0 decode", MatMul{Type: ggml.TypeQ8_0, Rows: 896, Cols: 896, N: 1}, "muser_mmv_q8_0", [3]uint32{224, 1, 1}, 128, 0},
		{"q8_0 decode 8", MatMul{Type: ggml.TypeQ8_0, Rows: 897, Cols: 896, N: 8}, "muser_mmv_q8_0", [3]uint32{225, 1, 1}, 128, 0},
		{"q8_0 prefill", MatMul{Type: ggml.TypeQ8_0, Rows: 4864, Cols: 896, N: 2048}, "muser_mmq_q8_0", [3]uint32{76, 32, 1}, 128, 2*64*160 + 3*64*144}, // raw rows of 10 chunks: 4 blocks of 34 bytes from any even byte
		{"q8_0 ragged", MatMul{Type: ggml.TypeQ8_0, Rows: 151936, Cols: 896, N: 77}, "muser_mmq_q8_0", [3]uint32{2374, 2, 1}, 128, 2*64*160 + 3*64*144},
		{"q4_k decode", MatMul{Type: ggml.TypeQ4_K, Rows: 2048, Cols: 8192, N: 3}, "muser_mmv_q4_k", [3]uint32{2048, 1, 1}, 128, 0},
		{"q4_k decode short rows", MatMul{Type: ggml.TypeQ4_K, Rows: 512, Cols: 512, N: 1}, "muser_mmv_q4_k", [3]uint32{64, 1, 1}, 128, 0},
		{"q6_k decode partial chunk", MatMul{Type: ggml.TypeQ6_K, Rows: 513, Cols: 1536, N: 8}, "muser_mmv_q6_k", [3]uint32{257, 1, 1}, 128, 0},
		{"q6_k prefill", MatMul{Type: ggml.TypeQ6_K, Rows: 1000, Cols: 1024, N: 9}, "muser_mmq_q6_k", [3]uint32{16, 1, 1}, 128, 2*64*240 + 3*64*272}, // a 210-byte super-block in 15 chunks
		{"nvfp4 decode", MatMul{Type: ggml.TypeNVFP4, Rows: 10, Cols: 64, N: 2}, "muser_mmv_nvfp4", [3]uint32{3, 1, 1}, 128, 0},
		{"f16 decode", MatMul{Type: ggml.TypeF16, Rows: 896, Cols: 896, N: 4}, "muser_mmfv_f16", [3]uint32{112, 1, 1}, 128, 0},
		{"f16 prefill", MatMul{Type: ggml.TypeF16, Rows: 896, Cols: 896, N: 100}, "muser_mmf_f16", [3]uint32{28, 4, 1}, 256, 0},
		{"bf16 prefill", MatMul{Type: ggml.TypeBF16, Rows: 33, Cols: 7, N: 33}, "muser_mmf_bf16", [3]uint32{2, 2, 1}, 256, 0},
		{"f32 decode", MatMul{Type: ggml.TypeF32, Rows: 5, Cols: 3, N: 1}, "muser_mmfv_f32", [3]uint32{1, 1, 1}, 128, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.m.Acts, tc.m.W, tc.m.Y = b, 0x1000, 0x2000
			l, err := tc.m.Launch()
			if err != nil {
				t.Fatal(err)
			}
			if l.Kernel != tc.kernel || l.Grid != tc.grid || l.Block != [3]uint32{tc.block, 1, 1} || l.Shared != tc.shared {
				t.Errorf("got %s grid %v block %v shared %d, want %s grid %v block [%d 1 1] shared %d",
					l.Kernel, l.Grid, l.Block, l.Shared, tc.kernel, tc.grid, tc.block, tc.shared)
			}
			ni := len(l.Args) - 1 // n is last, before the decode kernels' bias and res
			if tc.m.Epilogue() {
				ni -= 2
			}
			if got := l.Args[ni]; got != int32(tc.m.N) {
				t.Errorf("argument %d (n) = %v, want %d", ni, got, tc.m.N)
			}
		})
	}
}

func TestMatMulLaunchErrors(t *testing.T) {
	tests := []struct {
		name string
		m    MatMul
		want error
	}{
		{"cols not a block multiple", MatMul{Type: ggml.TypeQ8_0, Rows: 10, Cols: 48, N: 1}, ErrShape},
		{"k-quant cols", MatMul{Type: ggml.TypeQ4_K, Rows: 10, Cols: 896, N: 1}, ErrShape},
		{"no tokens", MatMul{Type: ggml.TypeQ8_0, Rows: 10, Cols: 64, N: 0}, ErrShape},
		{"no rows", MatMul{Type: ggml.TypeF16, Rows: 0, Cols: 64, N: 1}, ErrShape},
		{"too many tokens", MatMul{Type: ggml.TypeQ8_0, Rows: 10, Cols: 64, N: 64 * 65536}, ErrShape},
		{"int32 overflow", MatMul{Type: ggml.TypeQ8_0, Rows: 10, Cols: 1 << 20, N: 1 << 12}, ErrShape},
		{"iq type", MatMul{Type: ggml.TypeIQ4_NL, Rows: 10, Cols: 64, N: 1}, ErrType},
		{"activation type", MatMul{Type: ggml.TypeQ8_K, Rows: 10, Cols: 256, N: 1}, ErrType},
		{"bias on the tiled kernel", MatMul{Type: ggml.TypeQ8_0, Rows: 10, Cols: 64, N: 9, Bias: 5}, ErrShape},
		{"residual on a float type", MatMul{Type: ggml.TypeF16, Rows: 10, Cols: 64, N: 1, Res: 5}, ErrShape},
		{"tiled weights off 16 bytes", MatMul{Type: ggml.TypeQ8_0, Rows: 10, Cols: 64, N: 9, W: 0x1008}, ErrShape},
		{"tiled activations off 16 bytes", MatMul{Type: ggml.TypeQ4_K, Rows: 10, Cols: 256, N: 9, W: 0x1000,
			Acts: ActBufs{Q: 0x2000, D: 0x3000, Ext: 0x4004}}, ErrShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.m.Launch()
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var le *LaunchError
			if !errors.As(err, &le) || le.Kernel == "" {
				t.Errorf("got %T without a kernel name, want *LaunchError naming it", err)
			}
		})
	}
}

func TestActOfAndSizes(t *testing.T) {
	tests := []struct {
		typ          ggml.Type
		act          Act
		x, q, d, ext int64
		n, cols      int
	}{
		{ggml.TypeF32, ActF32, 0, 0, 0, 0, 2, 512},
		{ggml.TypeF16, ActF16, 4096, 0, 0, 0, 2, 512},
		{ggml.TypeBF16, ActBF16, 4096, 0, 0, 0, 2, 512},
		{ggml.TypeQ8_0, ActQ8_0, 0, 1024, 128, 0, 2, 512},
		{ggml.TypeNVFP4, ActQ8_0, 0, 1024, 128, 0, 2, 512},
		{ggml.TypeQ5_1, ActQ8_1, 0, 1024, 128, 128, 2, 512},
		{ggml.TypeQ6_K, ActQ8_K, 0, 1024, 16, 256, 2, 512},
	}
	for _, tc := range tests {
		t.Run(tc.typ.String(), func(t *testing.T) {
			a, err := ActOf(tc.typ)
			if err != nil || a != tc.act {
				t.Fatalf("ActOf = %d, %v; want %d", a, err, tc.act)
			}
			x, q, d, ext := ActSizes(a, tc.n, tc.cols)
			if x != tc.x || q != tc.q || d != tc.d || ext != tc.ext {
				t.Errorf("ActSizes = %d %d %d %d, want %d %d %d %d", x, q, d, ext, tc.x, tc.q, tc.d, tc.ext)
			}
		})
	}
	if _, err := ActOf(ggml.TypeIQ2_XXS); !errors.Is(err, ErrType) {
		t.Errorf("ActOf(IQ2_XXS) error = %v, want ErrType", err)
	}
}

func TestFusedQuantLaunches(t *testing.T) {
	b := ActBufs{X: 1, Q: 2, D: 3, Ext: 4}
	// The last four arguments of each launch: q, qd, s1, bsums.
	for _, tc := range []struct {
		name string
		l    func() (Launch, error)
		want []any
	}{
		{"RMSNormQuant Q8_1", func() (Launch, error) { return RMSNormQuant(10, 0, 11, 12, 2, 896, 1e-6, ActQ8_1, b) }, []any{uint64(2), uint64(3), uint64(4), uint64(0)}},
		{"RMSNormQuant Q8_K", func() (Launch, error) { return RMSNormQuant(10, 0, 11, 12, 2, 512, 1e-6, ActQ8_K, b) }, []any{uint64(2), uint64(3), uint64(0), uint64(4)}},
		{"AddRMSNormQuant Q8_0", func() (Launch, error) { return AddRMSNormQuant(10, 11, 0, 12, 11, 2, 896, 1e-6, ActQ8_0, b) }, []any{uint64(2), uint64(3), uint64(0), uint64(0)}},
		{"AddRMSNormQuant Q8_K", func() (Launch, error) { return AddRMSNormQuant(10, 11, 0, 12, 11, 2, 1024, 1e-6, ActQ8_K, b) }, []any{uint64(2), uint64(3), uint64(0), uint64(4)}},
		{"RMSNorm", func() (Launch, error) { return RMSNorm(10, 0, 11, 12, 2, 100, 1e-6) }, []any{uint64(0), uint64(0), uint64(0), uint64(0)}},
		{"SiLUMulQuant Q8_K", func() (Launch, error) { return SiLUMulQuant(1, 2, 1, 3, 1536, ActQ8_K, b) }, []any{uint64(2), uint64(3), uint64(0), uint64(4)}},
	} {
		l, err := tc.l()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := l.Args[len(l.Args)-4:]; !slices.Equal(got, tc.want) {
			t.Errorf("%s: q, qd, s1, bsums = %v, want %v", tc.name, got, tc.want)
		}
	}
	l, err := SiLUMulQuant(1, 2, 1, 3, 4864, ActQ8_0, b)
	if err != nil {
		t.Fatal(err)
	}
	if l.Grid != [3]uint32{3, 19, 1} {
		t.Errorf("SiLUMulQuant grid %v, want [3 19 1]", l.Grid)
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"rmsnorm q8_k ragged cols", func() error { _, err := RMSNormQuant(1, 0, 2, 3, 1, 896, 1e-6, ActQ8_K, b); return err }(), ErrShape},
		{"silu q8_k ragged cols", func() error { _, err := SiLUMulQuant(1, 2, 1, 1, 1568, ActQ8_K, b); return err }(), ErrShape},
		{"rmsnorm f16", func() error { _, err := RMSNormQuant(1, 0, 2, 3, 1, 256, 1e-6, ActF16, b); return err }(), ErrType},
		{"rmsnorm ragged cols", func() error { _, err := RMSNormQuant(1, 0, 2, 3, 1, 100, 1e-6, ActQ8_0, b); return err }(), ErrShape},
		{"add_rmsnorm f16", func() error { _, err := AddRMSNormQuant(1, 2, 0, 3, 2, 1, 64, 1e-6, ActF16, b); return err }(), ErrType},
		{"silu f32", func() error { _, err := SiLUMulQuant(1, 2, 1, 1, 64, ActF32, b); return err }(), ErrType},
		{"silu ragged cols", func() error { _, err := SiLUMulQuant(1, 2, 1, 1, 48, ActQ8_1, b); return err }(), ErrShape},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}

func TestQuantizeActs(t *testing.T) {
	b := ActBufs{X: 1, Q: 2, D: 3, Ext: 4}
	if _, ok, err := QuantizeActs(ActF32, 9, b, 4, 64); ok || err != nil {
		t.Errorf("ActF32: ok %v err %v, want no launch", ok, err)
	}
	l, ok, err := QuantizeActs(ActQ8_1, 9, b, 4, 64)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if l.Kernel != "muser_quant_q8_0" || l.Args[6] != uint64(4) || l.Args[5] != uint64(0) || l.Grid[0] != 4 {
		t.Errorf("Q8_1: got %s args %v grid %v, want muser_quant_q8_0 with s1 = Ext, no sums, 4 blocks", l.Kernel, l.Args, l.Grid)
	}
	l, _, _ = QuantizeActs(ActQ8_0, 9, b, 4, 64)
	if l.Args[6] != uint64(0) {
		t.Errorf("Q8_0: s1 = %v, want 0", l.Args[6])
	}
	l, _, _ = QuantizeActs(ActF16, 9, b, 3, 300)
	if l.Kernel != "muser_round_f16" || l.Grid[0] != 4 || l.Args[2] != int32(900) {
		t.Errorf("F16: got %s grid %v args %v, want muser_round_f16 over 900 values in 4 blocks", l.Kernel, l.Grid, l.Args)
	}
	for _, tc := range []struct {
		a    Act
		cols int
	}{{ActQ8_0, 48}, {ActQ8_K, 512 + 32}, {ActF16, 0}} {
		if _, _, err := QuantizeActs(tc.a, 9, b, 2, tc.cols); !errors.Is(err, ErrShape) {
			t.Errorf("act %d cols %d: error %v, want ErrShape", tc.a, tc.cols, err)
		}
	}
}

func TestAttnQueries(t *testing.T) {
	for _, tc := range []struct{ dim, shared int }{{64, 34816}, {72, 39168}, {128, 34816}, {188, 25568}, {256, 34816}, {300, 40800}, {352, 47872}} {
		if got := AttnQueries(tc.dim); got != attnQB {
			t.Errorf("AttnQueries(%d) = %d, want %d", tc.dim, got, attnQB)
		}
		if got := attnScoresShared(tc.dim); got != tc.shared || got > 48<<10 {
			t.Errorf("dim %d: scores shared memory %d bytes, want %d (at most 48 KiB)", tc.dim, got, tc.shared)
		}
	}
	if s := 2 * attnWKT * (attnWDB + attnWLD) * 4; s > 48<<10 {
		t.Errorf("weighted sum shared memory %d bytes > 48 KiB", s)
	}
}

func TestAttnTiles(t *testing.T) {
	tests := []struct {
		name                string
		kc                  []uint64
		pos                 []int32
		heads, kvheads, dim int
		want                []int32
	}{
		{"prefill qwen2.5", []uint64{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 14, 2, 64, []int32{0, 9, 11}},
		{"two sequences", []uint64{7, 7, 9, 9, 9}, []int32{3, 4, 0, 1, 2}, 16, 8, 128, []int32{0, 2, 5}},
		{"gap in positions", []uint64{7, 7, 7}, []int32{3, 4, 9}, 32, 8, 64, []int32{0, 2, 3}},
		{"decode batch", []uint64{1, 2, 3}, []int32{50, 60, 70}, 14, 2, 64, []int32{0, 1, 2, 3}},
		{"mha dim 256", []uint64{7, 7, 7, 7}, []int32{0, 1, 2, 3}, 16, 16, 256, []int32{0, 4}},
		{"group over a block", []uint64{7, 7}, []int32{0, 1}, 128, 1, 256, []int32{0, 1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := AttnTiles(tc.kc, tc.pos, tc.heads, tc.kvheads, tc.dim)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			qc := AttnQueries(tc.dim)
			gh := min(tc.heads/tc.kvheads, qc)
			for i := 0; i+1 < len(got); i++ {
				if rows := int(got[i+1] - got[i]); rows*gh > qc && rows > 1 {
					t.Errorf("tile %d has %d rows × %d heads > %d queries", i, rows, gh, qc)
				}
			}
		})
	}
}

func TestAttentionLaunches(t *testing.T) {
	a := Attention{F16: true, Heads: 14, KVHeads: 2, Dim: 64, N: 9, Q: 1, Out: 2, KC: 3, VC: 4, Pos: 5, Tiles: 6,
		NTiles: 3, MaxPos: 8, S: 7, LD: 12, M: 8, Inv: 9}
	ls, err := a.Launches()
	if err != nil {
		t.Fatal(err)
	}
	type launchWant struct {
		kernel string
		grid   [3]uint32
		block  uint32
		shared uint32
	}
	check := func(ls []Launch, want []launchWant) {
		t.Helper()
		if len(ls) != len(want) {
			t.Errorf("%d launches, want %d", len(ls), len(want))
			return
		}
		for i, w := range want {
			if ls[i].Kernel != w.kernel || ls[i].Grid != w.grid || ls[i].Block[0] != w.block || ls[i].Shared != w.shared {
				t.Errorf("launch %d: got %s grid %v block %d shared %d, want %s grid %v block %d shared %d",
					i, ls[i].Kernel, ls[i].Grid, ls[i].Block[0], ls[i].Shared, w.kernel, w.grid, w.block, w.shared)
			}
		}
	}
	check(ls, []launchWant{
		{"muser_attn_scores_f16", [3]uint32{3, 2, 1}, 256, 4 * 2 * 16 * 68 * 4},
		{"muser_attn_softmax8", [3]uint32{4, 1, 1}, 256, 0}, // ⌈9·14/32⌉
		{"muser_attn_wsum_f16", [3]uint32{3, 2, 1}, 128, 2 * 32 * (64 + 68) * 4},
	})
	if got := ls[0].Args[10]; got != AttnScale(64) || AttnScale(64) != 0.125 {
		t.Errorf("scale argument %v, want 0.125", got)
	}
	// The tiled kernels' scratch: the maxima from the scores to the
	// softmax, 1/sum from the softmax to the weighted sums.
	if ls[0].Args[8] != uint64(8) || ls[1].Args[1] != uint64(8) || ls[1].Args[2] != uint64(9) || ls[2].Args[1] != uint64(9) {
		t.Errorf("scratch arguments: scores M %v, softmax M %v Inv %v, weighted sum Inv %v, want 8, 8, 9, 9",
			ls[0].Args[8], ls[1].Args[1], ls[1].Args[2], ls[2].Args[1])
	}
	// Blocks of keys per scores thread block (the last argument): one for
	// a small grid, four for a prefill chunk's, as asked by KeyBlocks.
	for _, tc := range []struct {
		ntiles, maxPos, keyBlocks int
		nkb                       int32
		z                         uint32
	}{
		{3, 8, 0, 1, 1},
		{228, 8191, 0, 4, 32}, // 2,048 rows of an 8,192-token prefill: 58,368 thread blocks at one block of keys
		{12, 8191, 0, 1, 128}, // 96 rows at depth: 3,072 thread blocks, too few to share out
		{24, 8191, 0, 3, 43},  // 6,144 thread blocks
		{3, 700, 3, 3, 4},     // ⌈⌈701/64⌉/3⌉
		{3, 700, 9, 4, 3},     // at most 4
	} {
		b := a
		b.N, b.NTiles, b.MaxPos, b.LD, b.KeyBlocks = 9*tc.ntiles, tc.ntiles, tc.maxPos, tc.maxPos+1, tc.keyBlocks
		bl, err := b.Launches()
		if err != nil {
			t.Fatal(err)
		}
		if got := bl[0].Args[11]; got != tc.nkb || bl[0].Grid[2] != tc.z {
			t.Errorf("%d tiles to position %d, KeyBlocks %d: scores take %v blocks of keys over grid z %d, want %d over %d",
				tc.ntiles, tc.maxPos, tc.keyBlocks, got, bl[0].Grid[2], tc.nkb, tc.z)
		}
	}
	if AttnMaxBlocks(12) != 1 || AttnMaxBlocks(64) != 1 || AttnMaxBlocks(65) != 2 {
		t.Errorf("AttnMaxBlocks(12, 64, 65) = %d, %d, %d, want 1, 1, 2", AttnMaxBlocks(12), AttnMaxBlocks(64), AttnMaxBlocks(65))
	}
	for _, noScratch := range []Attention{{M: 0, Inv: 9}, {M: 8, Inv: 0}} {
		b := a
		b.M, b.Inv = noScratch.M, noScratch.Inv
		if _, err := b.Launches(); !errors.Is(err, ErrShape) {
			t.Errorf("tiled with M %d, Inv %d: error %v, want ErrShape", b.M, b.Inv, err)
		}
	}
	// Every tile one row (decode): the softmax per 1,024 positions, row
	// and head, the weighted sums per 8 heads × 8 dimensions and 2 of a
	// row's 9 parts (3·2·8 = 48 thread blocks at 9 parts each, spread to
	// 5 groups, ⌈9/5⌉ = 2 parts a block), then the parts' addition; the
	// sums per 1,024 positions after the maxima in M (3·14 rows of
	// ⌈2100/64⌉ = 33 maxima, 5,544 bytes, then ⌈2100/1024⌉ = 3 sums a
	// row, 1,008 bytes), then the parts' sums (⌈2100/256⌉ = 9 parts of 64
	// floats a row and head).
	d := a
	d.N, d.NTiles, d.MaxPos, d.LD = 3, 3, 2050, 2100
	d.Inv = 0 // not used
	ls, err = d.Launches()
	if err != nil {
		t.Fatal(err)
	}
	check(ls, []launchWant{
		{"muser_attn_scores_rows_f16", [3]uint32{17, 3, 2}, 128, 0}, // ⌈2051/128⌉ key blocks, rows, KV heads
		{"muser_attn_softmax_part", [3]uint32{3, 3, 14}, 256, 0},    // ⌈2051/1024⌉ blocks of positions, rows, heads
		{"muser_attn_wsum_rows_f16", [3]uint32{15, 2, 8}, 288, 0},   // rows × 5 groups of parts
		{"muser_attn_wsum_parts", [3]uint32{14, 3, 1}, 256, 0},      // heads, rows
	})
	const parts, y = 8 + 5544, 8 + 5544 + 1008
	if ls[0].Args[7] != uint64(8) || ls[1].Args[1] != uint64(8) || ls[1].Args[2] != uint64(parts) || ls[1].Args[4] != int32(3) ||
		ls[2].Args[1] != uint64(parts) || ls[2].Args[3] != int32(3) {
		t.Errorf("decode scratch arguments: scores M %v, softmax M %v sums %v per row %v, weighted sum sums %v per row %v, want 8, 8, %d, 3, %d, 3",
			ls[0].Args[7], ls[1].Args[1], ls[1].Args[2], ls[1].Args[4], ls[2].Args[1], ls[2].Args[3], parts, parts)
	}
	if ls[2].Args[7] != uint64(y) || ls[2].Args[8] != int32(9) || ls[2].Args[9] != int32(2) || ls[2].Args[10] != int32(5) ||
		ls[3].Args[0] != uint64(y) || ls[3].Args[5] != int32(9) || ls[3].Args[6] != int32(2) {
		t.Errorf("part sums: weighted sum Y %v np %v pc %v ng %v, addition Y %v np %v pc %v; want %d, 9, 2, 5, %d, 9, 2",
			ls[2].Args[7], ls[2].Args[8], ls[2].Args[9], ls[2].Args[10], ls[3].Args[0], ls[3].Args[5], ls[3].Args[6], y, y)
	}
	if got, want := d.MBytes(), int64(5544+1008+4*3*14*9*64); got != want {
		t.Errorf("decode MBytes = %d, want %d", got, want)
	}
	if got, want := (Attention{Heads: 1, Dim: 8, N: 1, NTiles: 1, LD: 64}).MBytes(), int64(8+8+4*8); got != want { // one maximum, padded to 8 bytes, one sum, one part
		t.Errorf("MBytes of one decode row of 64 = %d, want %d", got, want)
	}
	if got, want := (Attention{Heads: 14, Dim: 64, N: 9, NTiles: 3, LD: 12}).MBytes(), int64(9*14*4); got != want { // tiled: the maxima alone
		t.Errorf("tiled MBytes = %d, want %d", got, want)
	}
	// Parts per thread block as asked (at most the row's), and a batch
	// whose rows fit one thread block each (no addition launch): 9 rows'
	// grid of 144 blocks at 2 parts each spreads to ⌈256/144⌉ = 1 group.
	for _, tc := range []struct {
		n, maxPos, parts int
		gx               uint32
		pc               int32
		launches         int
	}{
		{3, 2050, 4, 9, 4, 4},   // 3 groups of 4 parts
		{3, 2050, 20, 3, 9, 3},  // all 9 in one
		{9, 300, 0, 9, 2, 3},    // 144 blocks: one group
		{1, 32767, 0, 16, 8, 4}, // 16 blocks: 128 parts over 16 groups of 8
		{1, 0, 0, 1, 1, 3},      // a first token
	} {
		b := d
		b.N, b.NTiles, b.MaxPos, b.LD, b.Parts = tc.n, tc.n, tc.maxPos, tc.maxPos+1, tc.parts
		bl, err := b.Launches()
		if err != nil {
			t.Fatal(err)
		}
		if len(bl) != tc.launches || bl[2].Grid[0] != tc.gx || bl[2].Args[9] != tc.pc {
			t.Errorf("%d rows to position %d, Parts %d: %d launches, weighted sum grid x %d, %v parts a block; want %d, %d, %d",
				tc.n, tc.maxPos, tc.parts, len(bl), bl[2].Grid[0], bl[2].Args[9], tc.launches, tc.gx, tc.pc)
		}
	}
	// Quantizing the output: the addition launch always comes, with the
	// activation buffers (Q8_1's sums too); the tiled path and other
	// forms or head dimensions are refused.
	for _, tc := range []struct {
		act      Act
		maxPos   int
		launches int
		s1       uint64
	}{
		{ActQ8_0, 0, 4, 0},       // one part: the addition launch only quantizes
		{ActQ8_1, 2050, 4, 0x30}, // parts over several blocks
	} {
		b := d
		b.N, b.NTiles, b.MaxPos, b.LD = 1, 1, tc.maxPos, tc.maxPos+1
		b.OutAct, b.OutQ = tc.act, ActBufs{Q: 0x10, D: 0x20, Ext: 0x30}
		bl, err := b.Launches()
		if err != nil {
			t.Fatal(err)
		}
		last := bl[len(bl)-1]
		if len(bl) != tc.launches || last.Kernel != "muser_attn_wsum_parts" || last.Args[7] != uint64(0x10) ||
			last.Args[8] != uint64(0x20) || last.Args[9] != tc.s1 {
			t.Errorf("%s output, position %d: %d launches, last %s with q %v d %v s1 %v; want %d, muser_attn_wsum_parts, 0x10, 0x20, %#x",
				tc.act.String(), tc.maxPos, len(bl), last.Kernel, last.Args[7], last.Args[8], last.Args[9], tc.launches, tc.s1)
		}
	}
	for _, tc := range []struct {
		name string
		mod  func(*Attention)
	}{
		{"q8_k", func(a *Attention) { a.OutAct = ActQ8_K }},
		{"dimension 72", func(a *Attention) { a.OutAct, a.Dim = ActQ8_0, 72 }},
		{"tiled", func(a *Attention) { a.OutAct, a.N, a.NTiles = ActQ8_0, 9, 3; a.Inv = 0x40 }},
	} {
		b := d
		b.N, b.NTiles, b.MaxPos, b.LD = 1, 1, 100, 101
		tc.mod(&b)
		if _, err := b.Launches(); !errors.Is(err, ErrShape) {
			t.Errorf("attention output quantized, %s: error %v, want ErrShape", tc.name, err)
		} else if tc.name == "q8_k" && !strings.Contains(err.Error(), "not q8_k") {
			t.Errorf("attention output quantized into q8_k: error %q does not name the form", err)
		}
		b.OutAct = ActF32
		if _, err := b.Launches(); err != nil {
			t.Errorf("attention output not quantized, %s: %v", tc.name, err)
		}
	}
	if attnRCH != kernels.AttnPart {
		t.Errorf("attnRCH %d, kernels.AttnPart %d: the weighted sum's parts differ", attnRCH, kernels.AttnPart)
	}
	nm := d
	nm.M = 0
	if _, err := nm.Launches(); !errors.Is(err, ErrShape) {
		t.Errorf("decode with M 0: error %v, want ErrShape", err)
	}
	// A group larger than a block's 64 queries: heads split over
	// blockIdx.y (and over 8-head blocks in the decode sums).
	a.Heads, a.KVHeads, a.Dim = 160, 1, 256
	ls, err = a.Launches()
	if err != nil {
		t.Fatal(err)
	}
	if ls[0].Grid[1] != 3 || ls[2].Grid[1] != 3 || ls[2].Grid[2] != 4 { // ⌈160/64⌉, ⌈256/64⌉
		t.Errorf("grid y = %d and %d, weighted-sum grid z %d, want 3, 3 (160 heads, 64 per block) and 4", ls[0].Grid[1], ls[2].Grid[1], ls[2].Grid[2])
	}
	d.Heads, d.KVHeads, d.Dim = 160, 1, 256
	ls, err = d.Launches()
	if err != nil {
		t.Fatal(err)
	}
	if g := ls[2].Grid; g != [3]uint32{3, 20, 32} { // ⌈160/8⌉, ⌈256/8⌉
		t.Errorf("decode weighted-sum grid %v, want [3 20 32]", g)
	}
	if ls[0].Kernel != "muser_attn_scores_f16" || ls[0].Args[8] != uint64(8) { // dim 256: past the decode scores kernel's 128
		t.Errorf("decode scores of dim 256 launch %s with M %v, want muser_attn_scores_f16 with 8", ls[0].Kernel, ls[0].Args[8])
	}
	for _, bad := range []Attention{
		{F16: true, Heads: 14, KVHeads: 3, Dim: 64, N: 1, NTiles: 1, LD: 1},
		{F16: true, Heads: 8, KVHeads: 8, Dim: 400, N: 1, NTiles: 1, LD: 1},
		{F16: true, Heads: 8, KVHeads: 8, Dim: 64, N: 1, NTiles: 1, MaxPos: 5, LD: 5},
		{F16: true, Heads: 8, KVHeads: 8, Dim: 64, N: 1, NTiles: 2, LD: 1},
		{F16: true, Heads: 8, KVHeads: 8, Dim: 64, N: 0, NTiles: 1, LD: 1},
	} {
		if _, err := bad.Launches(); !errors.Is(err, ErrShape) {
			t.Errorf("%+v: error %v, want ErrShape", bad, err)
		}
	}
}

func TestRoPEAttentionLaunch(t *testing.T) {
	ok := RoPEAttention{RoPEKVStore: RoPEKVStore{F16: true, Q: 1, K: 2, V: 3, N: 2, Heads: 14, KVHeads: 2, Dim: 64,
		RopeDim: 64, CS: 4, KC: 5, VC: 6, Pos: 7}, First: 12, Out: 8, MaxPos: AttnFusedMax - 1, OutAct: ActQ8_1,
		OutQ: ActBufs{Q: 9, D: 10, Ext: 11}}
	l, err := ok.Launch()
	if err != nil {
		t.Fatal(err)
	}
	if l.Kernel != "muser_rope_attn_f16" || l.Grid != [3]uint32{14, 2, 1} || l.Block != [3]uint32{attnFusedThreads, 1, 1} {
		t.Errorf("launch %s grid %v block %v, want muser_rope_attn_f16 grid [14 2 1] block [%d 1 1]", l.Kernel, l.Grid, l.Block, attnFusedThreads)
	}
	// The output's activations: q, d and (Q8_1) the sums, last.
	if got := l.Args[len(l.Args)-3:]; got[0] != uint64(9) || got[1] != uint64(10) || got[2] != uint64(11) {
		t.Errorf("output activations %v, want [9 10 11]", got)
	}
	tests := []struct {
		name string
		fits bool // Fits's answer; Launch fails with ErrShape whenever it is false
		edit func(a *RoPEAttention)
	}{
		{"as it is", true, func(a *RoPEAttention) {}},
		{"Q8_0 output", true, func(a *RoPEAttention) { a.OutAct = ActQ8_0 }},
		{"float output", true, func(a *RoPEAttention) { a.OutAct = ActF32 }},
		{"float heads of 48", true, func(a *RoPEAttention) { a.Dim, a.RopeDim, a.OutAct = 48, 48, ActF32 }},
		{"past the last position", false, func(a *RoPEAttention) { a.MaxPos = AttnFusedMax }},
		{"head too wide", false, func(a *RoPEAttention) { a.Dim, a.RopeDim = 256, 256 }},
		{"no rotation", false, func(a *RoPEAttention) { a.RopeDim = 0 }},
		{"quantized heads of 48", false, func(a *RoPEAttention) { a.Dim, a.RopeDim = 48, 48 }},
		{"K-quant output", false, func(a *RoPEAttention) { a.OutAct = ActQ8_K }},
	}
	for _, tc := range tests {
		a := ok
		tc.edit(&a)
		if a.Fits() != tc.fits {
			t.Errorf("%s: Fits %v, want %v", tc.name, a.Fits(), tc.fits)
		}
		if _, err := a.Launch(); tc.fits != (err == nil) || (err != nil && !errors.Is(err, ErrShape)) {
			t.Errorf("%s: Launch error %v, want ErrShape only where it does not fit", tc.name, err)
		}
	}
	for _, bad := range []RoPEKVStore{
		{F16: true, N: 1, Heads: 14, KVHeads: 3, Dim: 64, RopeDim: 64},  // heads not a multiple of KV heads
		{F16: true, N: 1, Heads: 14, KVHeads: 2, Dim: 64, RopeDim: 63},  // odd rotation
		{F16: true, N: 1, Heads: 14, KVHeads: 2, Dim: 64, RopeDim: 128}, // rotation past the head
		{F16: true, N: 0, Heads: 14, KVHeads: 2, Dim: 64, RopeDim: 64},  // no rows
	} {
		if _, err := (RoPEAttention{RoPEKVStore: bad, First: 12}).Launch(); !errors.Is(err, ErrShape) {
			t.Errorf("%+v: error %v, want ErrShape", bad, err)
		}
	}
	noRuns := ok
	noRuns.First = 0
	if _, err := noRuns.Launch(); !errors.Is(err, ErrShape) {
		t.Errorf("without First: error %v, want ErrShape", err)
	}
}

func TestRowOpLaunchErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"rmsnorm no rows", func() error { _, err := RMSNorm(1, 0, 1, 2, 0, 10, 1e-6); return err }()},
		{"heads wider than rows", func() error { _, err := RMSNormHeads(1, 2, 16, 64, 1000, 2, 1e-6); return err }()},
		{"odd rope dim", func() error { _, err := RoPE(1, 2, 2, 64, 128, 63, false, 2); return err }()},
		{"rope dim over head", func() error { _, err := RoPE(1, 2, 2, 64, 128, 66, false, 2); return err }()},
		{"embed cols", func() error { _, err := Embed(ggml.TypeQ4_K, 1, 10, 100, 2, 1, 3); return err }()},
		{"add nothing", func() error { _, err := Add(1, 2, 3, 0); return err }()},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, ErrShape) {
			t.Errorf("%s: error %v, want ErrShape", tc.name, tc.err)
		}
	}
	if _, err := Embed(ggml.TypeIQ1_S, 1, 10, 256, 2, 1, 3); !errors.Is(err, ErrType) {
		t.Errorf("embed IQ1_S: error %v, want ErrType", err)
	}
}

func TestKernelTableSorted(t *testing.T) {
	kt := KernelTable()
	if !slices.IsSortedFunc(kt, func(a, b Kernel) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	}) {
		t.Error("KernelTable is not sorted by name")
	}
	orig := kernelTable[0].Params[0]
	kt[0].Params[0] = orig + 1
	if kernelTable[0].Params[0] != orig {
		t.Error("changing KernelTable's result changed the table")
	}
}
