package cukernels

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/kernels"
)

// readSources reads the package's *.cu and *.cuh files.
func readSources(t *testing.T) []SourceFile {
	t.Helper()
	var files []SourceFile
	for _, pat := range []string{"*.cu", "*.cuh"} {
		names, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, SourceFile{Name: n, Data: b})
		}
	}
	return files
}

// TestSourceDigest ties the embedded artifacts to the sources: the digest
// of the *.cu and *.cuh files here must be the one the manifest recorded
// when they were built.
func TestSourceDigest(t *testing.T) {
	m, err := EmbeddedManifest()
	if err != nil {
		t.Fatalf("embedded manifest: %v", err)
	}
	files := readSources(t)
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	got := DigestSources(files)
	if got != m.SourceDigest || !slices.Equal(names, m.Sources) {
		t.Fatalf("the CUDA sources changed since the embedded kernels were built: sources %v have digest %s, "+
			"the manifest records %v with %s; run scripts/cuda/build-kernels.sh (on a machine with nvcc) and commit its output",
			names, got, m.Sources, m.SourceDigest)
	}
	if SourceDigest() != got {
		t.Errorf("SourceDigest() = %q, want %q", SourceDigest(), got)
	}
}

func TestEmbeddedAccessors(t *testing.T) {
	m, err := EmbeddedManifest()
	if err != nil {
		t.Fatal(err)
	}
	c := Cubin()
	if DigestBytes(c) != m.Cubin.Digest || !bytes.HasPrefix(c, []byte("\x7fELF")) {
		t.Errorf("Cubin() is not the manifest's ELF image (%s, want %s)", DigestBytes(c), m.Cubin.Digest)
	}
	c[0] = 0
	if Cubin()[0] != 0x7f {
		t.Error("Cubin() shares its bytes with the embedded image")
	}
	p := PTX()
	if DigestBytes(p) != m.PTX.Digest || !bytes.Contains(p, []byte(".target sm_90")) {
		t.Errorf("PTX() is not the manifest's sm_90 PTX (%s, want %s)", DigestBytes(p), m.PTX.Digest)
	}
	if k := Kernels(); !slices.Equal(k, m.Kernels) || len(k) != len(kernelTable) {
		t.Errorf("Kernels() = %d names, manifest %d, table %d", len(k), len(m.Kernels), len(kernelTable))
	}
}

// TestManifestRoundTrip checks that the Go form and the build script's form
// of the manifest are the same text.
func TestManifestRoundTrip(t *testing.T) {
	m, err := ParseManifest(manifestText)
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, manifestText) {
		t.Errorf("MarshalText of the embedded manifest differs from it:\ngot:\n%s\nwant:\n%s", out, manifestText)
	}
}

const goodManifest = `# comment
format 1
source-digest sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
sources a.cu b.cuh
nvcc Cuda compilation tools, release 11.8, V11.8.89
cubin-flags --fmad=false -arch=sm_90 -cubin
ptx-flags --fmad=false -arch=compute_90 -ptx
cubin muser_sm90.cubin sha256:1111111111111111111111111111111111111111111111111111111111111111 42
ptx muser_compute90.ptx sha256:2222222222222222222222222222222222222222222222222222222222222222 7
kernel muser_a
kernel muser_b
`

func TestParseManifest(t *testing.T) {
	m, err := ParseManifest([]byte(goodManifest))
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != 1 || m.Cubin.Size != 42 || m.PTX.Name != "muser_compute90.ptx" || !slices.Equal(m.Kernels, []string{"muser_a", "muser_b"}) ||
		!slices.Equal(m.Sources, []string{"a.cu", "b.cuh"}) || m.NVCC != "Cuda compilation tools, release 11.8, V11.8.89" {
		t.Errorf("parsed %+v", m)
	}
	bad := []struct {
		name, from, to string
		line           int
	}{
		{"unknown key", "format 1", "format 1\ncolour blue", 3},
		{"format 2", "format 1", "format 2", 2},
		{"repeated", "format 1", "format 1\nformat 1", 3},
		{"no value", "nvcc Cuda compilation tools, release 11.8, V11.8.89", "nvcc", 5},
		{"short digest", "source-digest sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "source-digest sha256:0123", 3},
		{"upper-case digest", "sha256:1111", "sha256:AAAA", 8},
		{"unsorted sources", "sources a.cu b.cuh", "sources b.cuh a.cu", 4},
		{"source with a path", "sources a.cu b.cuh", "sources ../a.cu", 4},
		{"not a source", "sources a.cu b.cuh", "sources a.cu b.c", 4},
		{"negative size", " 42\n", " -42\n", 8},
		{"size with a sign", " 42\n", " +42\n", 8},
		{"artifact fields", " 42\n", " 42 extra\n", 8},
		{"unsorted kernels", "kernel muser_a\nkernel muser_b", "kernel muser_b\nkernel muser_a", 11},
		{"repeated kernel", "kernel muser_b", "kernel muser_a", 11},
		{"kernel name", "kernel muser_b", "kernel 9lives", 11},
		{"carriage return", "format 1", "format 1\r", 2},
		{"missing ptx", "ptx muser_compute90.ptx sha256:2222222222222222222222222222222222222222222222222222222222222222 7\n", "", 0},
		{"no kernels", "kernel muser_a\nkernel muser_b\n", "", 0},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(goodManifest, tc.from, tc.to, 1)
			if text == goodManifest {
				t.Fatalf("test case does not change the manifest")
			}
			_, err := ParseManifest([]byte(text))
			var me *ManifestError
			if !errors.Is(err, ErrManifest) || !errors.As(err, &me) {
				t.Fatalf("got %v, want a *ManifestError wrapping ErrManifest", err)
			}
			if me.Line != tc.line {
				t.Errorf("error names line %d, want %d: %v", me.Line, tc.line, err)
			}
		})
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(goodManifest))
	f.Add(manifestText)
	f.Add([]byte("format 1\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		m, err := ParseManifest(text)
		if err != nil {
			if !errors.Is(err, ErrManifest) {
				t.Fatalf("error %v does not wrap ErrManifest", err)
			}
			return
		}
		out, err := m.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseManifest(out)
		if err != nil {
			t.Fatalf("the manifest's own text does not parse: %v\n%s", err, out)
		}
		out2, _ := m2.MarshalText()
		if !bytes.Equal(out, out2) {
			t.Fatalf("round trip changed the manifest:\n%s\n%s", out, out2)
		}
	})
}

func TestDigestSources(t *testing.T) {
	a := []SourceFile{{"b.cuh", []byte("x")}, {"a.cu", []byte("yz")}}
	b := []SourceFile{{"a.cu", []byte("yz")}, {"b.cuh", []byte("x")}}
	if DigestSources(a) != DigestSources(b) {
		t.Error("the digest depends on the order the files are given in")
	}
	// The definition: name NUL size NUL data, by name.
	want := DigestBytes([]byte("a.cu\x002\x00yzb.cuh\x001\x00x"))
	if got := DigestSources(a); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	c := []SourceFile{{"a.cu", []byte("y")}, {"b.cuh", []byte("zx")}}
	if DigestSources(c) == DigestSources(a) {
		t.Error("moving a byte from one file to the next does not change the digest")
	}
}

// TestExp32Constants checks the hexadecimal constants of common.cuh's
// exp32 against kernels.Exp32: Exp32 recomputed in Go with the constants
// read from the source must give kernels.Exp32's bits.
func TestExp32Constants(t *testing.T) {
	src, err := os.ReadFile("common.cuh")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^#define MUSER_EXP32_([A-Z0-9]+) (0x[0-9a-fA-F.]+p[+-]?[0-9]+)(f?)$`)
	c := map[string]float64{}
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		bits := 64
		if m[3] == "f" {
			bits = 32
		}
		v, err := strconv.ParseFloat(m[2], bits)
		if err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		c[m[1]] = v
	}
	if len(c) != 16 {
		t.Fatalf("found %d MUSER_EXP32_ constants, want 16", len(c))
	}
	// vec.go's constants, as written there (untyped constants rounded once
	// to float64).
	want := map[string]float64{
		"LOG2E": 1.4426950408889634, "LN2HI": 6.93147180369123816490e-01, "LN2LO": 1.90821492927058770002e-10,
		"POLY0": 1.0 / 39916800, "POLY1": 1.0 / 3628800, "POLY2": 1.0 / 362880, "POLY3": 1.0 / 40320,
		"POLY4": 1.0 / 5040, "POLY5": 1.0 / 720, "POLY6": 1.0 / 120, "POLY7": 1.0 / 24, "POLY8": 1.0 / 6,
		"POLY9": 0.5, "POLY10": 1, "POLY11": 1, "MAX": float64(float32(88.72284)),
	}
	for k, w := range want {
		if c[k] != w {
			t.Errorf("MUSER_EXP32_%s = %v, want %v (infer/kernels/vec.go)", k, c[k], w)
		}
	}
	exp := func(x float32) float32 {
		switch {
		case x != x:
			return x
		case x > float32(c["MAX"]):
			return float32(math.Inf(1))
		case x < -104:
			return 0
		}
		xd := float64(x)
		k := math.Floor(float64(xd*c["LOG2E"]) + 0.5)
		r := float64(xd-float64(k*c["LN2HI"])) - float64(k*c["LN2LO"])
		p := c["POLY0"]
		for i := 1; i <= 11; i++ {
			p = float64(p*r) + c["POLY"+strconv.Itoa(i)]
		}
		k1 := int(k) / 2
		k2 := int(k) - k1
		p = float64(p * math.Float64frombits(uint64(1023+k1)<<52))
		p = float64(p * math.Float64frombits(uint64(1023+k2)<<52))
		return float32(p)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 1 << 20 {
		x := float32(rng.Float64()*200 - 110)
		if i%2 == 0 {
			x = math.Float32frombits(rng.Uint32())
		}
		if got, want := exp(x), kernels.Exp32(x); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("Exp32(%v) with common.cuh's constants = %#08x, kernels.Exp32 = %#08x", x, math.Float32bits(got), math.Float32bits(want))
		}
	}
}
