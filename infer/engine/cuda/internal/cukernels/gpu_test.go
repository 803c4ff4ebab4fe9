package cukernels

// The GPU tests run the kernel suite (suite_test.go) on a GPU, at the
// shapes of the models muser serves (Qwen2.5-0.5B: hidden 896, ffn 4864,
// 14 heads over 2, head dim 64, vocab 151936; Qwen3-0.6B: 1024, 3072, 16
// over 8, 128; Llama-3.2-1B: 2048, 8192, 32 over 8, 64) and at ragged ones
// (rows, columns and token counts that are not multiples of any tile),
// and sweep the device primitives over all 2^32 float32 inputs.
//
// They need a CUDA driver and a GPU and skip, saying why, without them
// (MUSER_REQUIRE_CUDA=1 makes that a failure). On a GPU machine:
//
//	go test -c -o cukernels.test ./infer/engine/cuda/internal/cukernels
//	./cukernels.test -test.run GPU -test.v                # everything
//	./cukernels.test -test.run GPU -test.v -test.short    # sampled sweeps, first shapes
//	./cukernels.test -test.run '^$' -test.bench GPU       # kernel timings (gpu-ns/op)
//
// The module is the embedded cubin (sm_90); MUSER_CUKERNELS_IMAGE=ptx loads
// the PTX instead (JIT-compiled by the driver), and TestGPUPTXImage always
// runs a part of the suite through the PTX.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/engine/cuda/internal/cu"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/kernels"
)

// gpuEnv is an open device with the module loaded.
type gpuEnv struct {
	dev   *cu.Device
	info  cu.Info
	image string
	fns   map[string]cu.Function
}

func (g *gpuEnv) String() string { return fmt.Sprintf("%s (%s)", g.info.Name, g.image) }

var gpuEnvs struct {
	mu   sync.Mutex
	envs map[string]*gpuEnv
	errs map[string]error
	skip map[string]string
}

// closeGPUs closes the devices the tests opened (TestMain).
func closeGPUs() {
	gpuEnvs.mu.Lock()
	defer gpuEnvs.mu.Unlock()
	for _, g := range gpuEnvs.envs {
		g.dev.Close()
	}
}

// gpu returns the device with image ("cubin" or "ptx"; "" for the one
// MUSER_CUKERNELS_IMAGE names, the cubin by default) loaded, opening it the
// first time; it skips the test (or fails it, with MUSER_REQUIRE_CUDA=1)
// where there is no driver or device.
func gpu(t testing.TB, image string) *gpuEnv {
	t.Helper()
	if image == "" {
		image = "cubin"
		if os.Getenv("MUSER_CUKERNELS_IMAGE") == "ptx" {
			image = "ptx"
		}
	}
	gpuEnvs.mu.Lock()
	if gpuEnvs.envs == nil {
		gpuEnvs.envs, gpuEnvs.errs, gpuEnvs.skip = map[string]*gpuEnv{}, map[string]error{}, map[string]string{}
	}
	g, ok := gpuEnvs.envs[image]
	err, why := gpuEnvs.errs[image], gpuEnvs.skip[image]
	if !ok && err == nil && why == "" {
		g, why, err = openGPU(image)
		gpuEnvs.errs[image], gpuEnvs.skip[image] = err, why
		if g != nil {
			gpuEnvs.envs[image] = g
		}
	}
	gpuEnvs.mu.Unlock()
	if why != "" {
		if os.Getenv("MUSER_REQUIRE_CUDA") == "1" {
			t.Fatalf("%s (MUSER_REQUIRE_CUDA=1)", why)
		}
		t.Skip(why)
	}
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func openGPU(image string) (*gpuEnv, string, error) {
	drv, err := cu.Open()
	if err != nil {
		return nil, fmt.Sprintf("no CUDA driver: %v", err), nil
	}
	n, err := drv.DeviceCount()
	if err != nil || n == 0 {
		return nil, fmt.Sprintf("no CUDA device: driver %v: DeviceCount = %d, %v", drv, n, err), nil
	}
	dev, err := drv.OpenDevice(0)
	if err != nil {
		return nil, "", fmt.Errorf("OpenDevice(0): %w", err)
	}
	g := &gpuEnv{dev: dev, info: dev.Info(), image: image, fns: map[string]cu.Function{}}
	if image == "cubin" && (g.info.ComputeMajor != 9 || g.info.ComputeMinor != 0) {
		dev.Close()
		return nil, fmt.Sprintf("the cubin is for sm_90 and device 0 (%s) is sm_%d%d: run with MUSER_CUKERNELS_IMAGE=ptx",
			g.info.Name, g.info.ComputeMajor, g.info.ComputeMinor), nil
	}
	img := Cubin()
	if image == "ptx" {
		img = PTX()
	}
	err = dev.Do(func(c *cu.Ctx) error {
		m, err := c.LoadModule(img)
		if err != nil {
			return fmt.Errorf("loading the %s: %w", image, err)
		}
		for _, k := range kernelTable {
			f, err := c.Function(m, k.Name)
			if err != nil {
				return err
			}
			g.fns[k.Name] = f
		}
		return nil
	})
	if err != nil {
		dev.Close()
		return nil, "", err
	}
	return g, "", nil
}

// gpuOps are a session's operations inside one Device.Do.
type gpuOps struct {
	g    *gpuEnv
	c    *cu.Ctx
	bufs []cu.DevicePtr
}

func (o *gpuOps) alloc(n int) (DevPtr, error) {
	p, err := o.c.Alloc(uint64(n))
	if err != nil {
		return 0, err
	}
	o.bufs = append(o.bufs, p)
	return DevPtr(p), o.c.MemsetD8(p, 0xff, uint64(n))
}

func (o *gpuOps) up(p DevPtr, b []byte) error { return o.c.CopyHtoD(cu.DevicePtr(p), b) }

func (o *gpuOps) down(p DevPtr, b []byte) error {
	if err := o.c.Sync(o.c.Stream()); err != nil {
		return err
	}
	return o.c.CopyDtoH(b, cu.DevicePtr(p))
}

func (o *gpuOps) launch(l Launch) error {
	f, ok := o.g.fns[l.Kernel]
	if !ok {
		return fmt.Errorf("kernel %s not loaded", l.Kernel)
	}
	if l.Shared > 0 { // the default 48 KiB counts static shared memory too
		if err := o.c.SetMaxDynamicShared(f, int(l.Shared)); err != nil {
			return err
		}
	}
	return o.c.Launch(f, l.Grid, l.Block, l.Shared, o.c.Stream(), l.Args...)
}

// run runs f inside one Device.Do (calls in f run on the device's
// goroutine: they must not call t.Fatal) and fails the test on an error.
func (g *gpuEnv) run(t testing.TB, f func(s *session)) {
	t.Helper()
	err := g.dev.Do(func(c *cu.Ctx) error {
		ops := &gpuOps{g: g, c: c}
		s := &session{ops: ops, c: c}
		defer func() {
			for _, p := range ops.bufs {
				if err := c.Free(p); err != nil && s.err == nil {
					s.err = err
				}
			}
		}()
		f(s)
		if s.err == nil {
			s.err = c.Sync(c.Stream())
		}
		return s.err
	})
	if err != nil {
		t.Fatalf("on %v: %v", g, err)
	}
}

// ---------------------------------------------------------------------------
// The suite on the GPU.

// gpuMatMulCases are the shapes per family: the models' (hidden, ffn,
// vocab) and ragged ones (a partial shared-memory stage, one block).
var gpuMatMulCases = map[string][]mmCase{
	"legacy": {{896, 896, []int{1, 2, 5, 8, 9, 64, 77, 512}, false}, {4864, 896, []int{1, 77}, false},
		{4864, 896, []int{2048}, true}, {896, 4864, []int{3, 200}, false}, {151936, 896, []int{1, 9}, true},
		{65, 96, []int{1, 70}, false}, {1000, 32, []int{1, 65}, false}},
	"k": {{1024, 1024, []int{1, 8, 77}, false}, {3072, 1024, []int{9, 130}, false}, {1024, 3072, []int{2, 64}, false},
		{2048, 8192, []int{1, 64}, false}, {1000, 256, []int{5, 70}, false}, {1536, 512, []int{1, 8}, false},
		{512, 1536, []int{1, 9}, false}, {33, 8448, []int{1, 9}, false}},
	"nvfp4": {{896, 896, []int{1, 8, 77}, false}, {4864, 896, []int{9, 300}, false}, {100, 64, []int{1, 66}, false},
		{1000, 192, []int{3, 65}, false}},
	"float": {{896, 896, []int{1, 8, 77}, false}, {4864, 896, []int{9, 300}, false}, {65, 100, []int{1, 33}, false},
		{3, 7, []int{2}, false}},
}

// firstCases keeps each family's first shape and its first two token
// counts (-short, and the PTX image test).
func firstCases(m map[string][]mmCase) map[string][]mmCase {
	out := map[string][]mmCase{}
	for k, cs := range m {
		out[k] = []mmCase{{cs[0].rows, cs[0].cols, cs[0].ns[:min(2, len(cs[0].ns))], false}}
	}
	return out
}

var attnCases = []attnCase{
	{"qwen2.5-0.5b", 14, 2, 64},
	{"qwen3-0.6b", 16, 8, 128},
	{"llama-3.2-1b", 32, 8, 64},
	{"group over a block", 32, 2, 256},
	{"mha dim 72", 8, 8, 72},
}

// gpuAttnBatch: a prefill of sequence 0 from position 0, a chunk of
// sequence 1 after a prefix, a long decode in sequence 2, a first token in
// sequence 3.
var gpuAttnBatch = batchOf([3]int{0, 0, 40}, [3]int{1, 100, 5}, [3]int{2, 1500, 1}, [3]int{3, 0, 1})

func TestGPUQuantize(t *testing.T) {
	runQuantize(t, gpu(t, ""), []quantShape{{1, 896}, {7, 4864}, {77, 1024}, {33, 3072}, {9, 2048}, {5, 8192}, {3, 32}})
}

func TestGPUMatMul(t *testing.T) {
	g := gpu(t, "")
	cases := gpuMatMulCases
	if testing.Short() {
		cases = firstCases(cases)
	}
	runMatMul(t, g, allMatMulTypes, cases)
}

func TestGPUEmbed(t *testing.T) { runEmbed(t, gpu(t, ""), allMatMulTypes) }

func TestGPURowOps(t *testing.T) { runRowOps(t, gpu(t, ""), gpuRowOpSizes) }

func TestGPURoPEKVStore(t *testing.T) { runRoPEKVStore(t, gpu(t, "")) }

// TestGPURoPEAttention runs the fused decode attention on the shapes of
// Qwen2.5-0.5B (14 over 2 of 64), Qwen3-0.6B (16 over 8 of 128, half of
// each head rotated here) and an unaligned one (dim 20: scalar loads):
// single rows at the part edges up to the kernel's last position, a
// sequence with infinite keys among them, and runs of rows of one
// sequence (a verification step's five, the most a run may have).
func TestGPURoPEAttention(t *testing.T) {
	g := gpu(t, "")
	b := batchOf([3]int{0, 0, 1}, [3]int{1, 1, 1}, [3]int{2, 255, 1}, [3]int{3, 256, 1}, [3]int{4, 257, 1},
		[3]int{5, 1023, 1}, [3]int{6, 2047, 1}, [3]int{7, 2300, 1}, [3]int{8, AttnFusedMax - 1, 1},
		[3]int{9, 1790, 5}, [3]int{10, 3000, AttnFusedRun})
	b.inf = map[int][]int{5: {700}}
	runRoPEAttention(t, g, []ropeAttnCase{{14, 2, 64, 64}, {16, 8, 128, 64}, {20, 2, 20, 20}}, b)
}

func TestGPUAttention(t *testing.T) {
	g := gpu(t, "")
	runAttention(t, g, attnCases, gpuAttnBatch)
	// Three blocks of keys a scores thread block (the long decode row's
	// 24 blocks over eight), each score stored alone (an odd scratch row).
	b := gpuAttnBatch
	b.keyBlocks, b.oddLD = 3, true
	runAttention(t, g, attnCases, b)
}

func TestGPUDecodeSoftmax(t *testing.T) {
	runDecodeSoftmax(t, gpu(t, ""), []int{1, 7, 8, 513, 1100, 5000, 8192, 32768})
}

// TestGPUAttentionDecode runs the decode kernels at depth: single rows
// at the chunk edges up to 8,448 positions (emu_test.go's batch, with
// its infinite keys; also with a row's parts over thread blocks one and
// three at a time), and one row at 32,767 on the Qwen2.5-0.5B shape
// (its 128 parts over 16 thread blocks).
func TestGPUAttentionDecode(t *testing.T) {
	g := gpu(t, "")
	runAttention(t, g, append(attnCases, attnCase{"group 10, dim 20 (unaligned V rows)", 20, 2, 20}), emuDecodeBatch)
	for _, parts := range []int{1, 3} {
		b := emuDecodeBatch
		b.parts = parts
		runAttention(t, g, attnCases[:1], b)
	}
	runAttention(t, g, attnCases[:1], batchOf([3]int{0, 32767, 1}))
}

// TestGPUPTXImage loads the PTX (JIT-compiled by the driver with its
// default options, fused multiply-adds allowed) and runs a part of the
// suite through it: the explicit rounding modes of the PTX must keep every
// bit.
func TestGPUPTXImage(t *testing.T) {
	g := gpu(t, "ptx")
	runMatMul(t, g, []ggml.Type{ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeF32, ggml.TypeQ4_K, ggml.TypeNVFP4}, firstCases(gpuMatMulCases))
	runRowOps(t, g, gpuRowOpSizes)
	runAttention(t, g, attnCases[:2], gpuAttnBatch)
	runRoPEAttention(t, g, []ropeAttnCase{{14, 2, 64, 64}}, batchOf([3]int{0, 0, 1}, [3]int{1, 300, 4}, [3]int{2, 2047, 1}))
}

// ---------------------------------------------------------------------------
// Primitives over every input.

func TestGPUPrimitives(t *testing.T) {
	g := gpu(t, "")
	t.Run("tables", func(t *testing.T) {
		var f16, f16a, ue []byte
		g.run(t, func(s *session) {
			a, b, c := s.alloc(4*65536), s.alloc(4*65536), s.alloc(4*256)
			s.launch(SelfTestSmallTables(a, b, c))
			f16, f16a, ue = s.down(a, 4*65536), s.down(b, 4*65536), s.down(c, 4*256)
		})
		want := make([]float32, 65536)
		for h := range want {
			want[h] = ggml.F16ToF32(uint16(h))
		}
		sameBits(t, "f16_to_f32 of every f16 (ggml.F16ToF32)", bytesF32(f16), want)
		// The conversion instruction: the same bits but for NaNs, which
		// must stay NaNs (their payloads are free).
		arith := bytesF32(f16a)
		for h, w := range want {
			if w != w && arith[h] != arith[h] {
				arith[h] = w
			}
		}
		sameBits(t, "f16_to_f32_arith of every f16 (ggml.F16ToF32 but NaN payloads)", arith, want)
		wue := make([]float32, 256)
		for x := range wue {
			wue[x] = ggml.UE4M3Half(byte(x))
		}
		sameBits(t, "ue4m3_half of every byte (NVFP4 scales)", bytesF32(ue), wue)
	})
	// All 2^32 inputs, 2^24 at a time (every 64th chunk with -short).
	const chunk = 1 << 24
	step := uint64(chunk)
	if testing.Short() {
		step *= 64
	}
	t.Run("exp32", func(t *testing.T) {
		in := make([]byte, 4*chunk)
		for base := uint64(0); base < 1<<32; base += step {
			parallel(chunk, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					binary.LittleEndian.PutUint32(in[4*i:], uint32(base)+uint32(i))
				}
			})
			var out []byte
			g.run(t, func(s *session) {
				x, y := s.up(in), s.alloc(4*chunk)
				s.launch(SelfTestExp32(x, y, chunk))
				out = s.down(y, 4*chunk)
			})
			bad := sweepCheck(chunk, func(i int) bool {
				v := math.Float32frombits(uint32(base) + uint32(i))
				return binary.LittleEndian.Uint32(out[4*i:]) == math.Float32bits(kernels.Exp32(v))
			})
			if bad >= 0 {
				v := math.Float32frombits(uint32(base) + uint32(bad))
				t.Fatalf("exp32(bits %#08x = %g): got %#08x, want %#08x (kernels.Exp32)", math.Float32bits(v), v,
					binary.LittleEndian.Uint32(out[4*bad:]), math.Float32bits(kernels.Exp32(v)))
			}
		}
	})
	t.Run("f32 conversions and roundings", func(t *testing.T) {
		for base := uint64(0); base < 1<<32; base += step {
			checkF32Bits(t, g, uint32(base), chunk)
		}
	})
}

// ---------------------------------------------------------------------------
// Benchmarks: kernel times on the device (events around b.N rounds).

func benchLaunches(b *testing.B, g *gpuEnv, setup func(s *session) []Launch) {
	b.Helper()
	g.run(b, func(s *session) {
		ls := setup(s)
		for _, l := range ls { // warm up
			s.launch(l, nil)
		}
		if s.err != nil {
			return
		}
		c := s.c
		start, err := c.NewEvent()
		if err != nil {
			s.err = err
			return
		}
		defer c.DestroyEvent(start)
		end, err := c.NewEvent()
		if err != nil {
			s.err = err
			return
		}
		defer c.DestroyEvent(end)
		s.err = c.Record(start, c.Stream())
		for range b.N {
			for _, l := range ls {
				s.launch(l, nil)
			}
		}
		if s.err == nil {
			s.err = c.Record(end, c.Stream())
		}
		if s.err == nil {
			s.err = c.Sync(c.Stream())
		}
		if s.err == nil {
			d, err := c.Elapsed(start, end)
			s.err = err
			b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "gpu-ns/op")
		}
	})
}

func BenchmarkGPUMatMul(b *testing.B) {
	g := gpu(b, "")
	rng := rand.New(rand.NewPCG(61, 62))
	for _, c := range []struct {
		typ        ggml.Type
		rows, cols int
		n          int
	}{
		{ggml.TypeQ8_0, 896, 896, 2048}, {ggml.TypeQ8_0, 4864, 896, 2048}, {ggml.TypeQ8_0, 896, 4864, 2048},
		{ggml.TypeQ8_0, 151936, 896, 1}, {ggml.TypeQ8_0, 4864, 896, 1}, {ggml.TypeQ8_0, 896, 4864, 8},
		{ggml.TypeQ8_0, 896, 896, 1}, {ggml.TypeQ8_0, 896, 4864, 1}, {ggml.TypeQ4_0, 4864, 896, 1},
		{ggml.TypeF16, 4864, 896, 2048}, {ggml.TypeQ4_K, 3072, 1024, 2048}, {ggml.TypeQ6_K, 3072, 1024, 2048},
		{ggml.TypeNVFP4, 4864, 896, 2048},
	} {
		b.Run(fmt.Sprintf("%s/%dx%d/n=%d", c.typ, c.rows, c.cols, c.n), func(b *testing.B) {
			w := randomWeights(rng, c.typ, c.rows, c.cols)
			x := randomActs(rng, c.n, c.cols)
			act, _ := ActOf(c.typ)
			benchLaunches(b, g, func(s *session) []Launch {
				dx := s.up(f32Bytes(x))
				xs, qs, ds, es := ActSizes(act, c.n, c.cols)
				ab := ActBufs{X: dx, Q: s.alloc(int(qs)), D: s.alloc(int(ds)), Ext: s.alloc(int(es))}
				if xs > 0 {
					ab.X = s.alloc(int(xs))
				}
				var ls []Launch
				if l, ok, err := QuantizeActs(act, dx, ab, c.n, c.cols); ok && err == nil {
					ls = append(ls, l)
				}
				l, err := MatMul{Type: c.typ, W: s.up(w), Rows: c.rows, Cols: c.cols, Acts: ab, Y: s.alloc(4 * c.n * c.rows), N: c.n}.Launch()
				if err != nil && s.err == nil {
					s.err = err
				}
				return append(ls, l)
			})
		})
	}
}

func BenchmarkGPUAttention(b *testing.B) {
	g := gpu(b, "")
	rng := rand.New(rand.NewPCG(71, 72))
	for _, c := range []struct {
		attnCase
		rows, first int
	}{
		{attnCases[0], 2048, 0}, {attnCases[0], 1, 2047}, {attnCases[0], 1, 8191}, {attnCases[0], 1, 32767}, {attnCases[1], 2048, 0},
	} {
		// part: all the launches, or one step alone (after the ones
		// before it, once, so that it reads what it would); the weighted
		// sum includes the addition of its parts' sums where it has one.
		for part, pname := range []string{"scores", "softmax", "wsum", "all"} {
			b.Run(fmt.Sprintf("%s/rows=%d/from=%d/%s", c.name, c.rows, c.first, pname), func(b *testing.B) {
				Q, kvrow := c.heads*c.dim, c.kvheads*c.dim
				ntok := c.first + c.rows
				kv := make([]uint16, ntok*kvrow)
				for i := range kv {
					kv[i] = ggml.F32ToF16(float32(rng.NormFloat64()))
				}
				q := make([]float32, c.rows*Q)
				for i := range q {
					q[i] = float32(rng.NormFloat64())
				}
				benchLaunches(b, g, func(s *session) []Launch {
					dk, dv := s.up(u16Bytes(kv)), s.up(u16Bytes(kv))
					kc, vc, pos := make([]uint64, c.rows), make([]uint64, c.rows), make([]int32, c.rows)
					p := make([]int, c.rows)
					for i := range c.rows {
						kc[i], vc[i], pos[i], p[i] = uint64(dk), uint64(dv), int32(c.first+i), c.first+i
					}
					tiles := AttnTiles(kc, pos, c.heads, c.kvheads, c.dim)
					tl := make([]int, len(tiles))
					for i, x := range tiles {
						tl[i] = int(x)
					}
					ld := (ntok + 3) &^ 3
					a := Attention{F16: true, Heads: c.heads, KVHeads: c.kvheads, Dim: c.dim, N: c.rows,
						Q: s.up(f32Bytes(q)), Out: s.alloc(4 * c.rows * Q), KC: s.up(u64Bytes(kc)), VC: s.up(u64Bytes(vc)),
						Pos: s.up(i32s(p)), Tiles: s.up(i32s(tl)), NTiles: len(tiles) - 1, MaxPos: ntok - 1,
						S: s.alloc(4 * c.rows * c.heads * ld), LD: ld,
						Inv: s.alloc(4 * c.rows * c.heads)}
					a.M = s.alloc(int(a.MBytes()))
					ls, err := a.Launches()
					if err != nil && s.err == nil {
						s.err = err
					}
					if part == 3 {
						return ls
					}
					for _, l := range ls[:part] {
						s.launch(l, nil)
					}
					if part == 2 {
						return ls[2:]
					}
					return ls[part : part+1]
				})
			})
		}
	}
}
