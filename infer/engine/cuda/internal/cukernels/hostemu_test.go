package cukernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/kernels"
)

// The host-emulation tests compile the pure device functions of
// common.cuh and weights.cuh for the CPU with g++ (testdata/hostemu) and
// compare what they compute with the Go definitions, bit for bit. They
// check the logic of the f16/bf16 conversions, the integer roundings,
// Exp32, every weight type's decoding and the float epilogue of every
// family without a GPU; the GPU tests (gpu_test.go) check the kernels
// themselves. They skip where g++ is missing, unless
// MUSER_REQUIRE_GXX=1.

// TestMain closes the GPUs the tests opened and removes the host programs
// built for them.
func TestMain(m *testing.M) {
	code := m.Run()
	closeGPUs()
	for _, p := range []string{hostemuBuild.path, emuBuild.path} {
		if p != "" {
			os.RemoveAll(filepath.Dir(p))
		}
	}
	os.Exit(code)
}

var hostemuBuild struct {
	once sync.Once
	path string
	err  error
}

// hostemu returns the path of the built host program.
func hostemu(t *testing.T) string {
	t.Helper()
	gxx, err := exec.LookPath("g++")
	if err != nil {
		if os.Getenv("MUSER_REQUIRE_GXX") == "1" {
			t.Fatalf("g++ not found and MUSER_REQUIRE_GXX=1: %v", err)
		}
		t.Skipf("g++ not found (%v): the host emulation of the device functions needs it", err)
	}
	b := &hostemuBuild
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "muser-hostemu-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "hostemu")
		cmd := exec.Command(gxx, "-std=c++17", "-O2", "-ffp-contract=off", "-fno-fast-math",
			"-Wall", "-Wno-unknown-pragmas", "-Wno-unused-function",
			"-o", b.path, filepath.Join("testdata", "hostemu", "main.cpp"))
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("g++: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// runHostemu runs the host program with args and returns the file it
// wrote (the last argument).
func runHostemu(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(hostemu(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("hostemu %v: %v\n%s", args[0], err, out)
	}
	b, err := os.ReadFile(args[len(args)-1])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeTemp(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// sampleFloatBits returns float32 bit patterns for the primitive tests:
// a stride through all 2^32 patterns, the neighbourhoods of the f16,
// bf16 and rounding boundaries, and random ones.
func sampleFloatBits(rng *rand.Rand, stride uint32) []uint32 {
	var v []uint32
	for b := uint64(0); b < 1<<32; b += uint64(stride) {
		v = append(v, uint32(b)+uint32(rng.IntN(int(stride))))
	}
	edges := []float32{0, 0.5, 1.5, 2.5, 127.5, 128, 128.5, 65504, 65520, 0x1p-14, 0x1p-24, 0x1p-25, 0x1.8p-25,
		88.72284, 88.7229, -103.9, -104, -104.1, 4194304, 12582912, 0x1p22}
	for _, e := range edges {
		for _, s := range []float32{1, -1} {
			b := math.Float32bits(s * e)
			for d := uint32(0); d < 64; d++ {
				v = append(v, b+d, b-d)
			}
		}
	}
	for range 1 << 16 {
		v = append(v, rng.Uint32())
	}
	return v
}

func TestHostPrimitives(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bits := sampleFloatBits(rng, 1<<12)
	in := make([]byte, 4*len(bits))
	for i, b := range bits {
		in[4*i], in[4*i+1], in[4*i+2], in[4*i+3] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
	}
	outPath := filepath.Join(t.TempDir(), "out")
	out := bytesU32(runHostemu(t, "prims", writeTemp(t, "in", in), outPath))
	if len(out) != 5*len(bits) {
		t.Fatalf("got %d results, want %d", len(out), 5*len(bits))
	}
	// The CPU propagates a NaN's payload through nearestInt's addition on
	// amd64 and arm64 alike; the device code computes that, so the
	// comparison holds for every input there.
	payloadNaN := runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"
	fails := 0
	for i, b := range bits {
		v := math.Float32frombits(b)
		got := out[5*i : 5*i+5]
		want := [5]uint32{
			uint32(ggml.F32ToF16(v)),
			uint32(ggml.F32ToBF16(v)),
			uint32(int32(refRoundAway(v))),
			uint32(refNearestInt(v)),
			math.Float32bits(kernels.Exp32(v)),
		}
		names := [5]string{"f32_to_f16", "f32_to_bf16", "round_away", "nearest_int", "exp32"}
		for k := range 5 {
			if k == 3 && v != v && !payloadNaN {
				continue
			}
			if got[k] != want[k] {
				if fails++; fails <= 10 {
					t.Errorf("%s(bits %#08x = %v): got %#x, want %#x", names[k], b, v, got[k], want[k])
				}
			}
		}
	}
	if fails > 0 {
		t.Errorf("%d mismatches in %d inputs", fails, len(bits))
	}
}

func TestHostTables(t *testing.T) {
	out := bytesU32(runHostemu(t, "tables", filepath.Join(t.TempDir(), "out")))
	if len(out) != 65536+256 {
		t.Fatalf("got %d values, want %d", len(out), 65536+256)
	}
	for h := range 65536 {
		if want := math.Float32bits(ggml.F16ToF32(uint16(h))); out[h] != want {
			t.Errorf("f16_to_f32(%#04x): got %#08x, want %#08x", h, out[h], want)
		}
	}
	for x := range 256 {
		if want := math.Float32bits(ggml.UE4M3Half(byte(x))); out[65536+x] != want {
			t.Errorf("ue4m3_half(%#02x): got %#08x, want %#08x", x, out[65536+x], want)
		}
	}
}

// hostTypes are the quantized weight types the device code decodes.
var hostTypes = []ggml.Type{
	ggml.TypeQ8_0, ggml.TypeQ4_0, ggml.TypeQ5_0, ggml.TypeQ4_1, ggml.TypeQ5_1,
	ggml.TypeQ2_K, ggml.TypeQ3_K, ggml.TypeQ4_K, ggml.TypeQ5_K, ggml.TypeQ6_K, ggml.TypeNVFP4,
}

func TestHostDequantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range hostTypes {
		t.Run(typ.String(), func(t *testing.T) {
			const blocks = 512
			n := blocks * typ.BlockSize()
			src := randomWeights(rng, typ, 1, n)
			dir := t.TempDir()
			got := bytesF32(runHostemu(t, "deq", strconv.Itoa(int(typ)), strconv.Itoa(blocks),
				writeTemp(t, "in", src), filepath.Join(dir, "out")))
			want := make([]float32, n)
			if err := ggml.Dequantize(typ, src, want); err != nil {
				t.Fatal(err)
			}
			if len(got) != n {
				t.Fatalf("got %d values, want %d", len(got), n)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("element %d (block %d): got %#08x (%v), want %#08x (%v)", i, i/typ.BlockSize(),
						math.Float32bits(got[i]), got[i], math.Float32bits(want[i]), want[i])
				}
			}
		})
	}
}

func TestHostMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pool := kernels.NewPool(2)
	defer pool.Close()
	const rows, cols, n = 7, 1024, 6
	for _, typ := range hostTypes {
		t.Run(typ.String(), func(t *testing.T) {
			w := randomWeights(rng, typ, rows, cols)
			x := randomActs(rng, n, cols)
			act, err := ActOf(typ)
			if err != nil {
				t.Fatal(err)
			}
			qa := refQuantize(act, x, n, cols)
			want := refMatMul(t, pool, typ, w, rows, cols, x, qa, n)
			dir := t.TempDir()
			ext := qa.ext
			if ext == nil {
				ext = []byte{}
			}
			got := bytesF32(runHostemu(t, "dot", strconv.Itoa(int(typ)), strconv.Itoa(rows), strconv.Itoa(cols), strconv.Itoa(n),
				writeTemp(t, "w", w), writeTemp(t, "q", i8Bytes(qa.q)), writeTemp(t, "d", f32Bytes(qa.d)), writeTemp(t, "e", ext),
				filepath.Join(dir, "y")))
			if len(got) != len(want) {
				t.Fatalf("got %d outputs, want %d", len(got), len(want))
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("y[token %d][row %d] (%d rows × %d cols × %d tokens): got %#08x (%v), want %#08x (%v)",
						i/rows, i%rows, rows, cols, n, math.Float32bits(got[i]), got[i], math.Float32bits(want[i]), want[i])
				}
			}
		})
	}
}
