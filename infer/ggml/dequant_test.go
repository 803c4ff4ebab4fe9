package ggml

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// handBlock is one block built byte by byte from the format's definition,
// with the value every element must decode to, computed by hand.
type handBlock struct {
	typ  Type
	src  []byte
	want func(e int) float32
}

func handBlocks() []handBlock {
	var out []handBlock

	// F32, F16, BF16: plain little-endian scalars.
	out = append(out,
		handBlock{TypeF32, []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}, func(e int) float32 { return []float32{1, -2}[e] }},
		handBlock{TypeF16, []byte{0x00, 0x3c, 0x00, 0xc5, 0x01, 0x00}, func(e int) float32 { return []float32{1, -5, 1.0 / (1 << 24)}[e] }},
		handBlock{TypeBF16, []byte{0x80, 0x3f, 0x49, 0x40}, func(e int) float32 { return []float32{1, 3.140625}[e] }},
	)

	// Q4_0: d = 2.0 (0x4000); qs[j] = j | (15-j)<<4.
	// Element j < 16 is (j - 8) * 2; element 16+j is (15-j-8) * 2.
	q40 := []byte{0x00, 0x40}
	for j := 0; j < 16; j++ {
		q40 = append(q40, byte(j)|byte(15-j)<<4)
	}
	out = append(out, handBlock{TypeQ4_0, q40, func(e int) float32 {
		if e < 16 {
			return float32(2*e - 16)
		}
		return float32(14 - 2*(e-16))
	}})

	// Q4_1: d = 0.5 (0x3800), m = -1 (0xbc00); same nibbles.
	// Element is q * 0.5 - 1.
	q41 := []byte{0x00, 0x38, 0x00, 0xbc}
	q41 = append(q41, q40[2:]...)
	out = append(out, handBlock{TypeQ4_1, q41, func(e int) float32 {
		q := e
		if e >= 16 {
			q = 15 - (e - 16)
		}
		return float32(q)*0.5 - 1
	}})

	// Q5_0: d = 1 (0x3c00), qh = 0xaaaaaaaa (bit i set for odd i), same
	// nibbles. Element i has fifth bit i&1; its value is q5 - 16.
	q50 := []byte{0x00, 0x3c, 0xaa, 0xaa, 0xaa, 0xaa}
	q50 = append(q50, q40[2:]...)
	q5 := func(e int) int {
		low := e
		if e >= 16 {
			low = 15 - (e - 16)
		}
		return low + 16*(e&1)
	}
	out = append(out, handBlock{TypeQ5_0, q50, func(e int) float32 { return float32(q5(e) - 16) }})

	// Q5_1: d = 1, m = 2 (0x4000), same qh and nibbles. Element is q5 + 2.
	q51 := []byte{0x00, 0x3c, 0x00, 0x40, 0xaa, 0xaa, 0xaa, 0xaa}
	q51 = append(q51, q40[2:]...)
	out = append(out, handBlock{TypeQ5_1, q51, func(e int) float32 { return float32(q5(e) + 2) }})

	// Q8_0: d = 0.25 (0x3400), qs[j] = 8j - 128. Element is 2j - 32.
	q80 := []byte{0x00, 0x34}
	for j := 0; j < 32; j++ {
		q80 = append(q80, byte(int8(8*j-128)))
	}
	out = append(out, handBlock{TypeQ8_0, q80, func(e int) float32 { return float32(2*e - 32) }})

	// Q2_K: scales[i] = i | (15-i)<<4 (scale i, min 15-i for sub-block i of
	// 16 elements); every qs byte 0xe4 holds 0,1,2,3 in its four 2-bit
	// fields; d = 1, dmin = 0.5. Element e lies in sub-block e/16 and uses
	// field (e%128)/32, so its value is (e/16) * field - 0.5 * (15 - e/16).
	q2k := make([]byte, 84)
	for i := 0; i < 16; i++ {
		q2k[i] = byte(i) | byte(15-i)<<4
	}
	for i := 16; i < 80; i++ {
		q2k[i] = 0xe4
	}
	q2k[80], q2k[81], q2k[82], q2k[83] = 0x00, 0x3c, 0x00, 0x38
	out = append(out, handBlock{TypeQ2_K, q2k, func(e int) float32 {
		is, field := e/16, (e%128)/32
		return float32(is*field) - 0.5*float32(15-is)
	}})

	// Q3_K: every 6-bit scale is 33 (low nibbles 1 in bytes 0-7, high
	// pairs 0b10 in bytes 8-11) except scale 8, whose low nibble comes from
	// byte 0's high nibble (3): 35. So d*(scale-32) is 1, or 3 in sub-block
	// 8. qs bytes 0x1b hold 3,2,1,0 in their 2-bit fields; every hmask bit
	// is set (no -4) except bit 0 of hmask[0], which covers element 0.
	// d = 1.
	q3k := make([]byte, 110)
	for i := 0; i < 32; i++ {
		q3k[i] = 0xff
	}
	q3k[0] = 0xfe
	for i := 32; i < 96; i++ {
		q3k[i] = 0x1b
	}
	for i := 96; i < 104; i++ {
		q3k[i] = 0x11
	}
	q3k[96] = 0x31
	for i := 104; i < 108; i++ {
		q3k[i] = 0xaa
	}
	q3k[108], q3k[109] = 0x00, 0x3c
	out = append(out, handBlock{TypeQ3_K, q3k, func(e int) float32 {
		dl := float32(1)
		if e/16 == 8 {
			dl = 3
		}
		q := 3 - (e%128)/32
		if e == 0 {
			q -= 4
		}
		return dl * float32(q)
	}})

	// Q4_K and Q5_K share the 12 scale bytes: sub-blocks 0-3 take scale
	// q[j]&63 and min q[j+4]&63; 4-7 take the nibbles of q[j+4] plus the
	// top two bits of q[j-4] (scale) and q[j] (min). With
	// q = 0x41,2,3,4, 0x85,6,7,8, 0x21,0x43,0x65,0x87 the scales are
	// 1,2,3,4,17,3,5,7 and the mins 5,6,7,8,34,4,6,8. d = 1, dmin = 0.5.
	kScales := []byte{0x41, 2, 3, 4, 0x85, 6, 7, 8, 0x21, 0x43, 0x65, 0x87}
	sc := []float32{1, 2, 3, 4, 17, 3, 5, 7}
	mn := []float32{5, 6, 7, 8, 34, 4, 6, 8}
	// Quant byte b (0..127) is (b%16) | (15-b%16)<<4; group g = e/64 uses
	// bytes 32g..32g+31, low nibbles for sub-block 2g, high for 2g+1.
	kq := func(e int) (sub int, q int) {
		g, r := e/64, e%64
		if r < 32 {
			return 2 * g, r % 16
		}
		return 2*g + 1, 15 - (r-32)%16
	}
	q4k := []byte{0x00, 0x3c, 0x00, 0x38}
	q4k = append(q4k, kScales...)
	for b := 0; b < 128; b++ {
		q4k = append(q4k, byte(b%16)|byte(15-b%16)<<4)
	}
	out = append(out, handBlock{TypeQ4_K, q4k, func(e int) float32 {
		sub, q := kq(e)
		return sc[sub]*float32(q) - 0.5*mn[sub]
	}})

	// Q5_K: as Q4_K, with qh[l] = 0x55 for even l and 0 for odd l: bit 2g
	// (the low-nibble sub-block of group g) is set on even l, adding 16.
	q5k := []byte{0x00, 0x3c, 0x00, 0x38}
	q5k = append(q5k, kScales...)
	for l := 0; l < 32; l++ {
		q5k = append(q5k, []byte{0x55, 0x00}[l%2])
	}
	q5k = append(q5k, q4k[16:]...)
	out = append(out, handBlock{TypeQ5_K, q5k, func(e int) float32 {
		sub, q := kq(e)
		if r := e % 64; r < 32 && r%2 == 0 {
			q += 16
		}
		return sc[sub]*float32(q) - 0.5*mn[sub]
	}})

	// Q6_K: every ql byte 0x5a (low 10, high 5), every qh byte 0xe4
	// (fields 0,1,2,3), scales[i] = i - 8, d = 0.5. Within each 128-element
	// half n, quarter k = (e%128)/32 reads (low, field 0), (low, 1),
	// (high, 2), (high, 3): q6 - 32 = -22, -6, 5, 21; its scale index is
	// 8n + (e%32)/16 + 2k.
	q6k := make([]byte, 210)
	for i := 0; i < 128; i++ {
		q6k[i] = 0x5a
	}
	for i := 128; i < 192; i++ {
		q6k[i] = 0xe4
	}
	for i := 0; i < 16; i++ {
		q6k[192+i] = byte(int8(i - 8))
	}
	q6k[208], q6k[209] = 0x00, 0x38
	out = append(out, handBlock{TypeQ6_K, q6k, func(e int) float32 {
		n, k := e/128, (e%128)/32
		idx := 8*n + (e%32)/16 + 2*k
		return 0.5 * float32(idx-8) * float32([]int{-22, -6, 5, 21}[k])
	}})

	// Q8_K: d = 0.125 (float32 0x3e000000), qs[j] = j - 128; bsums unused.
	q8k := make([]byte, 292)
	binary.LittleEndian.PutUint32(q8k, 0x3e000000)
	for j := 0; j < 256; j++ {
		q8k[4+j] = byte(int8(j - 128))
	}
	out = append(out, handBlock{TypeQ8_K, q8k, func(e int) float32 { return float32(e-128) * 0.125 }})

	// NVFP4, two blocks. Byte 8s+j of a sub-block's quants is j | (15-j)<<4:
	// its low nibble, code j, is value j of the sub-block and its high
	// nibble, code 15-j, value j+8. Twice the E2M1 value of codes 0..7 is
	// 0 1 2 3 4 6 8 12, of codes 15..8 −12 −8 −6 −4 −3 −2 −1 0. The scale
	// bytes of block 0 are 0x38 (exponent 7, mantissa 0: 1.0, half 0.5),
	// 0x30 (exponent 6: 0.5, half 0.25), 0x01 (subnormal 1·2^−9, half
	// 2^−10) and 0x7F (NaN, read as 0). Block 1 has scales 0xB8 (bit 7 is
	// ignored: 0.5), 0xFF (exponent 15, mantissa 7: 1.875·2^8 = 480, half
	// 240), 0x80 (0) and 0x7E (1.75·2^8 = 448, half 224), and every quant
	// byte 0x97: code 7 (12) low, code 9 (−1) high.
	nv := []byte{0x38, 0x30, 0x01, 0x7f}
	for s := 0; s < 4; s++ {
		for j := 0; j < 8; j++ {
			nv = append(nv, byte(j)|byte(15-j)<<4)
		}
	}
	nv = append(nv, 0xb8, 0xff, 0x80, 0x7e)
	for j := 0; j < 32; j++ {
		nv = append(nv, 0x97)
	}
	out = append(out, handBlock{TypeNVFP4, nv, func(e int) float32 {
		s, i := (e%64)/16, e%16
		if e < 64 {
			v := []float32{0, 1, 2, 3, 4, 6, 8, 12, -12, -8, -6, -4, -3, -2, -1, 0}[i]
			return v * []float32{0.5, 0.25, 1.0 / 1024, 0}[s]
		}
		d := []float32{0.5, 240, 0, 224}[s]
		if i < 8 {
			return 12 * d
		}
		return -d
	}})
	return out
}

func TestDequantizeHandBlocks(t *testing.T) {
	for _, hb := range handBlocks() {
		t.Run(hb.typ.String(), func(t *testing.T) {
			n := len(hb.src) / hb.typ.TypeSize() * hb.typ.BlockSize()
			if size, err := hb.typ.RowSize(n); err != nil || size != len(hb.src) {
				t.Fatalf("hand block is %d bytes; RowSize(%d) = %d, %v", len(hb.src), n, size, err)
			}
			got := make([]float32, n)
			if err := Dequantize(hb.typ, hb.src, got); err != nil {
				t.Fatal(err)
			}
			for e := range got {
				if want := hb.want(e); math.Float32bits(got[e]) != math.Float32bits(want) {
					t.Errorf("element %d: got %v, want %v", e, got[e], want)
				}
			}
		})
	}
}

func readRef(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ref", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func floats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestDequantizeReference decodes blocks of random bytes (with finite
// scales) and compares every float32 bit with the output of ggml's
// reference dequantize_row_* (testdata/ref/dequant.*; see
// docs/benchmarks.md and the package doc for how they were made).
func TestDequantizeReference(t *testing.T) {
	for _, typ := range []Type{TypeQ4_0, TypeQ4_1, TypeQ5_0, TypeQ5_1, TypeQ8_0, TypeQ2_K, TypeQ3_K, TypeQ4_K, TypeQ5_K, TypeQ6_K, TypeQ8_K, TypeNVFP4} {
		t.Run(typ.String(), func(t *testing.T) {
			src := readRef(t, "dequant."+typ.String()+".q")
			want := floats(readRef(t, "dequant."+typ.String()+".f32"))
			got := make([]float32, len(want))
			if err := Dequantize(typ, src, got); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("element %d: got %v (%#08x), want %v (%#08x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		})
	}
}

func TestDequantizeErrors(t *testing.T) {
	tests := []struct {
		name string
		typ  Type
		src  int
		dst  int
		want error
	}{
		{"short src", TypeQ4_0, 17, 32, ErrSize},
		{"long src", TypeQ4_0, 19, 32, ErrSize},
		{"partial block", TypeQ4_K, 144, 128, ErrSize},
		{"unknown type", Type(4), 18, 32, ErrUnknownType},
		{"undecodable type", TypeIQ2_XS, 74, 256, ErrUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Dequantize(tc.typ, make([]byte, tc.src), make([]float32, tc.dst))
			if !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzDequantize decodes arbitrary bytes as every decodable type: it must
// never panic, and a whole number of blocks must always decode.
func FuzzDequantize(f *testing.F) {
	for _, hb := range handBlocks() {
		f.Add(uint8(hb.typ), hb.src)
	}
	f.Add(uint8(TypeQ4_K), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, id uint8, src []byte) {
		typ := Type(id)
		n := 0
		if bs := typ.TypeSize(); bs > 0 {
			n = len(src) / bs * typ.BlockSize()
		}
		dst := make([]float32, n)
		err := Dequantize(typ, src, dst)
		if typ.CanDequantize() && len(src)%typ.TypeSize() == 0 && err != nil {
			t.Fatalf("%s: %d whole blocks failed: %v", typ, len(src)/typ.TypeSize(), err)
		}
	})
}

var update = flag.Bool("update", false, "rewrite the committed fuzz seed corpus under testdata/fuzz")

// TestWriteFuzzSeeds writes the hand blocks as FuzzDequantize seeds and
// nvfp4Seeds as FuzzNVFP4 seeds when run with -update, and otherwise checks
// that both corpora are present.
func TestWriteFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDequantize")
	if !*update {
		for _, target := range []string{"FuzzDequantize", "FuzzNVFP4"} {
			dir := filepath.Join("testdata", "fuzz", target)
			if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
				t.Errorf("no committed seeds in %s (run go test -run TestWriteFuzzSeeds -update): %v", dir, err)
			}
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, hb := range handBlocks() {
		body := fmt.Sprintf("go test fuzz v1\nbyte(%q)\n[]byte(%s)\n", rune(hb.typ), strconv.Quote(string(hb.src)))
		if err := os.WriteFile(filepath.Join(dir, "hand-"+hb.typ.String()), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir = filepath.Join("testdata", "fuzz", "FuzzNVFP4")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, in := range nvfp4Seeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(in)))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
