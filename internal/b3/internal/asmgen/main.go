package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
)

var out strings.Builder

func emit(format string, args ...any) {
	fmt.Fprintf(&out, format, args...)
	out.WriteByte('\n')
}

// The BLAKE3 initialisation vector (the first words of SHA-256's).
var iv = [8]uint32{0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19}

// msgPermutation is BLAKE3's message word permutation between rounds.
var msgPermutation = [16]int{2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8}

func z(i int) string { return fmt.Sprintf("Z%d", i) }

// v returns the register of state word i: Z16..Z31. The message words
// live in Z0..Z15 (word j of every lane in Zj) while the rounds run.
func v(i int) string { return z(16 + i) }

// transpose16 transposes the 16×16 dword matrix whose rows are Z0..Z15
// (row r in Zr) so that Zc holds column c, using Z16..Z31 as scratch.
func transpose16() {
	// Stage 1: interleave dwords of row pairs (r, r+1) into Z16+r, Z17+r.
	for r := 0; r < 16; r += 2 {
		emit("\tVPUNPCKLDQ %s, %s, %s", z(r+1), z(r), z(16+r))
		emit("\tVPUNPCKHDQ %s, %s, %s", z(r+1), z(r), z(17+r))
	}
	// Stage 2: interleave qwords of pairs (lo,lo) and (hi,hi) within each
	// group of four rows. Group g's U[c] lands in Z(4g+c): lane k holds
	// column 4k+c of rows 4g..4g+3.
	for g := 0; g < 4; g++ {
		b := 16 + 4*g
		emit("\tVPUNPCKLQDQ %s, %s, %s", z(b+2), z(b), z(4*g+0))
		emit("\tVPUNPCKHQDQ %s, %s, %s", z(b+2), z(b), z(4*g+1))
		emit("\tVPUNPCKLQDQ %s, %s, %s", z(b+3), z(b+1), z(4*g+2))
		emit("\tVPUNPCKHQDQ %s, %s, %s", z(b+3), z(b+1), z(4*g+3))
	}
	// Stage 3: for column phase c, gather 128-bit lanes of the groups:
	// A = [U0.0 U0.1 U1.0 U1.1], B = [U0.2 U0.3 U1.2 U1.3], C and D
	// likewise of groups 2 and 3, into Z16+4c .. Z19+4c.
	for c := 0; c < 4; c++ {
		u := func(g int) string { return z(4*g + c) }
		t := 16 + 4*c
		emit("\tVSHUFI32X4 $0x44, %s, %s, %s", u(1), u(0), z(t+0))
		emit("\tVSHUFI32X4 $0xEE, %s, %s, %s", u(1), u(0), z(t+1))
		emit("\tVSHUFI32X4 $0x44, %s, %s, %s", u(3), u(2), z(t+2))
		emit("\tVSHUFI32X4 $0xEE, %s, %s, %s", u(3), u(2), z(t+3))
	}
	// Stage 4: column 4k+c from lanes k of A..D.
	for c := 0; c < 4; c++ {
		t := 16 + 4*c
		emit("\tVSHUFI32X4 $0x88, %s, %s, %s", z(t+2), z(t+0), z(c))
		emit("\tVSHUFI32X4 $0xDD, %s, %s, %s", z(t+2), z(t+0), z(4+c))
		emit("\tVSHUFI32X4 $0x88, %s, %s, %s", z(t+3), z(t+1), z(8+c))
		emit("\tVSHUFI32X4 $0xDD, %s, %s, %s", z(t+3), z(t+1), z(12+c))
	}
}

// round emits one BLAKE3 round over the state Z16..Z31 with message
// schedule s (s[i] is the message register of position i): the column
// step, then the diagonal step, each as four G functions interleaved
// instruction by instruction.
func round(s [16]int) {
	type g struct{ a, b, c, d, x, y int }
	cols := []g{{0, 4, 8, 12, s[0], s[1]}, {1, 5, 9, 13, s[2], s[3]}, {2, 6, 10, 14, s[4], s[5]}, {3, 7, 11, 15, s[6], s[7]}}
	diag := []g{{0, 5, 10, 15, s[8], s[9]}, {1, 6, 11, 12, s[10], s[11]}, {2, 7, 8, 13, s[12], s[13]}, {3, 4, 9, 14, s[14], s[15]}}
	for _, gs := range [][]g{cols, diag} {
		step := func(f func(q g)) {
			for _, q := range gs {
				f(q)
			}
		}
		for half, m := range []func(q g) int{func(q g) int { return q.x }, func(q g) int { return q.y }} {
			rd, rb := 16, 12
			if half == 1 {
				rd, rb = 8, 7
			}
			// a += m before a += b: the message word is ready long
			// before b, so the chain through b is one add shorter.
			step(func(q g) { emit("\tVPADDD %s, %s, %s", z(m(q)), v(q.a), v(q.a)) })
			step(func(q g) { emit("\tVPADDD %s, %s, %s", v(q.b), v(q.a), v(q.a)) })
			step(func(q g) { emit("\tVPXORD %s, %s, %s", v(q.a), v(q.d), v(q.d)) })
			step(func(q g) { emit("\tVPRORD $%d, %s, %s", rd, v(q.d), v(q.d)) })
			step(func(q g) { emit("\tVPADDD %s, %s, %s", v(q.d), v(q.c), v(q.c)) })
			step(func(q g) { emit("\tVPXORD %s, %s, %s", v(q.c), v(q.b), v(q.b)) })
			step(func(q g) { emit("\tVPRORD $%d, %s, %s", rb, v(q.b), v(q.b)) })
		}
	}
}

func kernel() {
	emit("// func hashMany16(in *[16]*byte, nblocks int, key *[8]uint32, ctr *[32]uint32, flags, start, end uint32, out *[16][32]byte)")
	emit("// Frame: the chaining values of the 16 lanes, word i of every lane at 64*i(SP).")
	emit("TEXT ·hashMany16(SB), NOSPLIT, $512-56")
	emit("\tMOVQ in+0(FP), SI")
	emit("\tMOVQ nblocks+8(FP), CX")
	emit("\tMOVQ key+16(FP), AX")
	emit("\tMOVQ ctr+24(FP), R9")
	emit("\tMOVL flags+32(FP), R10")
	emit("\tMOVL start+36(FP), R11")
	emit("\tMOVL end+40(FP), R12")
	emit("\tMOVQ out+48(FP), DI")
	for i := 0; i < 8; i++ {
		emit("\tVPBROADCASTD %d(AX), Z0", 4*i)
		emit("\tVMOVDQU32 Z0, %d(SP)", 64*i)
	}
	emit("\tXORQ DX, DX // byte offset of the block")
	emit("\tORL R10, R11 // flags of the first block")
	emit("\tORL R10, R12 // flags of the last block")
	emit("\tMOVL R11, BX")
	emit("loop:")
	emit("\tCMPQ CX, $1")
	emit("\tJNE notlast")
	emit("\tORL R12, BX")
	emit("notlast:")
	for r := 0; r < 16; r++ {
		emit("\tMOVQ %d(SI), R8", 8*r)
		emit("\tVMOVDQU32 (R8)(DX*1), %s", z(r))
	}
	transpose16()
	for i := 0; i < 8; i++ {
		emit("\tVMOVDQU32 %d(SP), %s", 64*i, v(i))
	}
	for i := 0; i < 4; i++ {
		emit("\tMOVL $0x%08X, AX", iv[i])
		emit("\tVPBROADCASTD AX, %s", v(8+i))
	}
	emit("\tVMOVDQU32 (R9), %s", v(12))
	emit("\tVMOVDQU32 64(R9), %s", v(13))
	emit("\tMOVL $64, AX")
	emit("\tVPBROADCASTD AX, %s", v(14))
	emit("\tVPBROADCASTD BX, %s", v(15))
	var s [16]int
	for i := range s {
		s[i] = i
	}
	for r := 0; r < 7; r++ {
		emit("\t// round %d", r)
		round(s)
		var n [16]int
		for i := range n {
			n[i] = s[msgPermutation[i]]
		}
		s = n
	}
	for i := 0; i < 8; i++ {
		emit("\tVPXORD %s, %s, %s", v(8+i), v(i), v(i))
		emit("\tVMOVDQU32 %s, %d(SP)", v(i), 64*i)
	}
	emit("\tMOVL R10, BX // flags of the middle blocks")
	emit("\tADDQ $64, DX")
	emit("\tDECQ CX")
	emit("\tJNZ loop")
	emit("\t// Transpose the chaining values to one 32-byte row per lane.")
	for i := 0; i < 8; i++ {
		emit("\tVMOVDQA32 %s, %s", v(i), z(i))
	}
	transpose16()
	for l := 0; l < 16; l++ {
		emit("\tVMOVDQU32 Y%d, %d(DI)", l, 32*l)
	}
	emit("\tVZEROUPPER")
	emit("\tRET")
}

// generate returns the text of hash_amd64.s.
func generate() string {
	out.Reset()
	emit("// Code generated by internal/asmgen; DO NOT EDIT.")
	emit("")
	emit("//go:build !purego")
	emit("")
	emit("#include \"textflag.h\"")
	emit("")
	kernel()
	return out.String()
}

func main() {
	outFile := flag.String("out", "hash_amd64.s", "output file")
	flag.Parse()
	if err := os.WriteFile(*outFile, []byte(generate()), 0o644); err != nil {
		log.Fatal(err)
	}
}
