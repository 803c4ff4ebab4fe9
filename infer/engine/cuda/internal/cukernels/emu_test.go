package cukernels

// The emulator tests run the kernel suite (suite_test.go) on the host:
// testdata/hostemu/emu.cpp compiles muser.cu with g++ over simt.h, a CUDA
// execution model in which every CUDA thread is an OS thread, barriers
// are barriers and warp-wide operations (shuffles, ballots, reductions,
// the integer mma) exchange values between the 32 threads of a warp. The
// kernels' own code runs, indexing and synchronisation included, at small
// shapes with ragged edges, against the same Go definitions as on a GPU.
// What the emulator cannot show is a difference between the GPU's
// instructions and their C++ stand-ins (shim.h, simt.h); the GPU tests do.
//
// They skip where g++ is missing (MUSER_REQUIRE_GXX=1 makes that a
// failure).

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// emuDevice runs sessions through the host emulator.
type emuDevice struct{ path string }

func (e *emuDevice) String() string { return "the host emulator" }

var emuBuild struct {
	once sync.Once
	path string
	err  error
}

// emu returns the emulator, building it the first time.
func emu(t testing.TB) *emuDevice {
	t.Helper()
	gxx, err := exec.LookPath("g++")
	if err != nil {
		if os.Getenv("MUSER_REQUIRE_GXX") == "1" {
			t.Fatalf("g++ not found and MUSER_REQUIRE_GXX=1: %v", err)
		}
		t.Skipf("g++ not found (%v): the host emulator of the kernels needs it", err)
	}
	b := &emuBuild
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "muser-emu-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "emu")
		cmd := exec.Command(gxx, "-std=c++20", "-O1", "-pthread", "-ffp-contract=off", "-fno-fast-math",
			"-Wall", "-Wno-unknown-pragmas", "-Wno-unused-function", "-Wno-unused-variable",
			"-o", b.path, filepath.Join("testdata", "hostemu", "emu.cpp"))
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("g++: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return &emuDevice{path: b.path}
}

// emuBase is where the emulator maps the first allocation; allocations are
// 2 MiB apart at least.
const emuBase = 0x200000000000

type emuPending struct {
	file string
	b    []byte
}

// emuOps writes a session as a script for the emulator.
type emuOps struct {
	dir     string
	script  strings.Builder
	next    uint64
	files   int
	pending []emuPending
}

func (o *emuOps) file() string {
	o.files++
	return filepath.Join(o.dir, fmt.Sprintf("f%d", o.files))
}

func (o *emuOps) alloc(n int) (DevPtr, error) {
	p := emuBase + o.next
	o.next += (uint64(n) + 2<<20 - 1) &^ (2<<20 - 1)
	fmt.Fprintf(&o.script, "alloc %x %d\n", p, n)
	return DevPtr(p), nil
}

func (o *emuOps) up(p DevPtr, b []byte) error {
	f := o.file()
	if err := os.WriteFile(f, b, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(&o.script, "up %x %s\n", uint64(p), f)
	return nil
}

func (o *emuOps) down(p DevPtr, b []byte) error {
	f := o.file()
	fmt.Fprintf(&o.script, "down %x %d %s\n", uint64(p), len(b), f)
	o.pending = append(o.pending, emuPending{f, b})
	return nil
}

func (o *emuOps) launch(l Launch) error {
	fmt.Fprintf(&o.script, "launch %s %d %d %d %d %d %d %d", l.Kernel, l.Grid[0], l.Grid[1], l.Grid[2],
		l.Block[0], l.Block[1], l.Block[2], l.Shared)
	for i, a := range l.Args {
		switch v := a.(type) {
		case uint64:
			fmt.Fprintf(&o.script, " p%x", v)
		case int32:
			fmt.Fprintf(&o.script, " i%d", v)
		case uint32:
			fmt.Fprintf(&o.script, " u%x", v)
		case float32:
			fmt.Fprintf(&o.script, " f%x", math.Float32bits(v))
		default:
			return fmt.Errorf("argument %d has type %T", i, a)
		}
	}
	o.script.WriteByte('\n')
	return nil
}

// run writes f's session as a script, runs the emulator on it and fills
// the slices of f's down calls.
func (e *emuDevice) run(t testing.TB, f func(s *session)) {
	t.Helper()
	ops := &emuOps{dir: t.TempDir()}
	s := &session{ops: ops}
	f(s)
	if s.err != nil {
		t.Fatalf("on %v: %v", e, s.err)
	}
	script := filepath.Join(ops.dir, "script")
	if err := os.WriteFile(script, []byte(ops.script.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(e.path, script).CombinedOutput(); err != nil {
		t.Fatalf("emulator: %v\n%s\nscript:\n%s", err, out, ops.script.String())
	}
	for _, p := range ops.pending {
		b, err := os.ReadFile(p.file)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != len(p.b) {
			t.Fatalf("emulator wrote %d bytes to %s, want %d", len(b), p.file, len(p.b))
		}
		copy(p.b, b)
	}
}

// emuMatMulCases: ragged rows and tokens (not multiples of 64, 16, 8 or 4),
// more than one shared-memory stage and a partial last stage; for the
// 32-value types' decode kernel, rows of each chunk width (32, 64 and 128
// blocks: 4, 2 and 1 rows a CTA) and a row of two chunks, the second
// partial; for the K-quants' decode kernel, rows of 1, 3 (a partial chunk
// of 4), 6 (of 8) and 33 super-blocks (two chunks of 16 and one of 1).
var emuMatMulCases = map[string][]mmCase{
	"legacy": {{70, 160, []int{3, 70}, false}, {9, 32, []int{9}, false}, {7, 1280, []int{1, 9}, false}, {5, 4160, []int{1, 3}, false}},
	"k": {{70, 512, []int{3, 70}, false}, {9, 256, []int{1}, false}, {7, 768, []int{9}, false},
		{5, 1536, []int{2}, false}, {3, 8448, []int{1}, false}},
	"nvfp4": {{70, 192, []int{3, 70}, false}},
	"float": {{70, 100, []int{3, 33}, false}, {3, 7, []int{2}, false}},
}

// TestEmuF32Bits checks the scalar conversions on windows of float32 bits
// around the edges of round_f16_again's shortcut and of the conversions
// (the f16 normal exponents' ends, the smallest f16 subnormal, zero, one,
// infinity and NaN, both signs); the GPU test sweeps all 2^32.
func TestEmuF32Bits(t *testing.T) {
	e := emu(t)
	const w = 1 << 14
	for _, c := range []uint32{0x38800000, 0x47000000, 0x47800000, 0x00000000, 0x7f800000, 0x3f800000, 0x33800000, 0x33000000} {
		for _, sign := range []uint32{0, 0x80000000} {
			checkF32Bits(t, e, (c|sign)-w/2, w)
		}
	}
}

func TestEmuQuantize(t *testing.T) {
	runQuantize(t, emu(t), []quantShape{{2, 512}, {3, 96}})
}

func TestEmuMatMul(t *testing.T) {
	types := allMatMulTypes
	if testing.Short() { // one type of each family
		types = []ggml.Type{ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeNVFP4, ggml.TypeF16}
	}
	runMatMul(t, emu(t), types, emuMatMulCases)
}

func TestEmuEmbed(t *testing.T) { runEmbed(t, emu(t), allMatMulTypes) }

func TestEmuRowOps(t *testing.T) {
	runRowOps(t, emu(t), rowOpSizes{
		n: 5, cols: []int{96, 1100, 1088, 512, 4128}, heads: [][2]int{{4, 64}, {2, 300}}, ffn: 560,
		ropeDim: [][3]int{{4, 64, 64}, {2, 128, 64}},
	})
}

func TestEmuRoPEKVStore(t *testing.T) { runRoPEKVStore(t, emu(t)) }

// TestEmuRoPEAttention: single rows at a first position, across the
// weighted sum's parts (255|256|257), and at the fused kernel's last
// position; runs of rows of one sequence (a verification step's five
// across a part's end, a first prompt's three, the most a run may have);
// head dimensions of the vector loads (64) and the scalar ones (40,
// whose output is not quantized), all or half of each head rotated; a
// sequence whose K has infinities.
func TestEmuRoPEAttention(t *testing.T) {
	e := emu(t)
	b := batchOf([3]int{0, 0, 1}, [3]int{1, 1, 1}, [3]int{2, 255, 1}, [3]int{3, 256, 1}, [3]int{4, 257, 1},
		[3]int{5, 600, 1}, [3]int{6, 253, 5}, [3]int{7, 0, 3})
	b.inf = map[int][]int{5: {300}, 6: {100}}
	runRoPEAttention(t, e, []ropeAttnCase{{14, 2, 64, 64}, {4, 4, 64, 32}}, b)
	runRoPEAttention(t, e, []ropeAttnCase{{6, 2, 40, 40}}, batchOf([3]int{0, 3, 1}, [3]int{1, AttnFusedMax - AttnFusedRun, AttnFusedRun}))
}

func TestEmuAttention(t *testing.T) {
	e := emu(t)
	runAttention(t, e, []attnCase{{"gqa", 4, 2, 64}, {"mha dim 72", 2, 2, 72}},
		batchOf([3]int{0, 0, 20}, [3]int{1, 40, 3}, [3]int{2, 70, 1}, [3]int{3, 0, 1}))
	runAttention(t, e, []attnCase{{"group over a block", 32, 2, 256}, {"group over 64", 160, 2, 16}}, batchOf([3]int{0, 0, 2}, [3]int{1, 40, 1}))
	runAttention(t, e, []attnCase{{"gqa across key blocks", 4, 2, 64}}, emuTiledBatch)
	// Three blocks of keys a thread block (a tile's four blocks over two
	// thread blocks, the second computing one), scores stored one float
	// at a time (an odd row of scratch), at head dimensions 64 (the
	// straight-line chains of an f16 cache) and 72.
	b := emuTiledBatch
	b.keyBlocks, b.oddLD = 3, true
	runAttention(t, e, []attnCase{{"gqa across key blocks", 4, 2, 64}, {"mha dim 72", 2, 2, 72}}, b)
	// Tiles across the weighted sum's parts (256|257, 512|513) and rows
	// of four parts.
	runAttention(t, e, []attnCase{{"gqa across parts", 4, 2, 64}}, batchOf([3]int{0, 250, 10}, [3]int{1, 509, 6}, [3]int{2, 1000, 3}))
}

// emuTiledBatch: tiles of several rows whose positions cross the scores
// kernel's 64-key blocks (63|64, 127|128, 191|192), rows attending to 3
// and 4 blocks of keys, a tile that ends at position 63 (the block of
// keys after it is never computed, its maxima never written), first
// positions, and a sequence whose K has infinities at key 130 (its rows'
// +Inf or NaN scores make some heads' softmax NaN, in one block of keys
// of several; a −Inf score gives others a zero weight).
var emuTiledBatch = func() attnBatch {
	b := batchOf([3]int{0, 120, 20}, [3]int{1, 60, 8}, [3]int{2, 188, 6}, [3]int{3, 61, 3}, [3]int{4, 0, 2})
	b.inf = map[int][]int{2: {130}}
	return b
}()

func TestEmuDecodeSoftmax(t *testing.T) { runDecodeSoftmax(t, emu(t), []int{1, 7, 8, 513, 1100, 5000}) }

// emuDecodeBatch: single decode rows (one per sequence) at the depths
// where the decode kernels' chunks and blocks end: a first token, the
// weighted sum's 256-position chunks (and the scores' 128-key blocks),
// the softmax's 1,024-position blocks (4,096 positions: four whole; 4,098:
// one past), and past 8,192. Sequence 2's K has infinities at key 100
// (its rows' +Inf score makes the softmax NaN), sequence 3's at its own
// position (a −Inf score only, for a head whose query sign gives it: a
// zero weight).
var emuDecodeBatch = attnBatch{
	seq: []int{0, 1, 2, 3, 4, 5, 6, 7, 8},
	pos: []int{0, 1, 255, 256, 257, 4095, 4097, 8200, 8448},
	inf: map[int][]int{2: {100}, 3: {256}},
}

func TestEmuAttentionDecode(t *testing.T) {
	e := emu(t)
	cases := []attnCase{{"qwen2.5-0.5b", 14, 2, 64}, {"group 10, dim 20 (unaligned V rows)", 20, 2, 20}}
	if testing.Short() {
		cases = cases[:1]
	}
	runAttention(t, e, cases, emuDecodeBatch)
	// A row's parts spread over thread blocks one and three at a time,
	// their sums added by muser_attn_wsum_parts (the rows of at most
	// that many parts are still added by their one thread block).
	for _, parts := range []int{1, 3} {
		b := emuDecodeBatch
		b.parts = parts
		runAttention(t, e, cases[:1], b)
	}
}
