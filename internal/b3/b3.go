package b3

import (
	"encoding/binary"
	"math/bits"
)

// Size is the length of a digest in bytes.
const Size = 32

const (
	chunkLen  = 1024
	blockLen  = 64
	lanes     = 16
	bufLen    = lanes * chunkLen // a Hasher buffers up to 16 chunks
	batchMax  = 256              // chunks hashed per batch (8 KiB of chaining values)
	maxDepth  = 54               // 2^54 chunks is more than 2^64 bytes
	flagStart = 1 << 0
	flagEnd   = 1 << 1
	flagPar   = 1 << 2
	flagRoot  = 1 << 3
)

var iv = [8]uint32{0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19}

// compress is BLAKE3's compression function on one block: it returns the
// 16-word state whose first 8 words, xored with the last 8, are the new
// chaining value (and, for the root, the digest).
func compress(cv *[8]uint32, m *[16]uint32, counter uint64, blen, flags uint32) [16]uint32 {
	v0, v1, v2, v3, v4, v5, v6, v7 := cv[0], cv[1], cv[2], cv[3], cv[4], cv[5], cv[6], cv[7]
	v8, v9, v10, v11 := iv[0], iv[1], iv[2], iv[3]
	v12, v13, v14, v15 := uint32(counter), uint32(counter>>32), blen, flags
	m0, m1, m2, m3, m4, m5, m6, m7 := m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]
	m8, m9, m10, m11, m12, m13, m14, m15 := m[8], m[9], m[10], m[11], m[12], m[13], m[14], m[15]
	// The seven rounds, unrolled: round r takes the message words in the
	// order of the permutation applied r times.
	// round 0
	v0, v4, v8, v12 = g(v0, v4, v8, v12, m0, m1)
	v1, v5, v9, v13 = g(v1, v5, v9, v13, m2, m3)
	v2, v6, v10, v14 = g(v2, v6, v10, v14, m4, m5)
	v3, v7, v11, v15 = g(v3, v7, v11, v15, m6, m7)
	v0, v5, v10, v15 = g(v0, v5, v10, v15, m8, m9)
	v1, v6, v11, v12 = g(v1, v6, v11, v12, m10, m11)
	v2, v7, v8, v13 = g(v2, v7, v8, v13, m12, m13)
	v3, v4, v9, v14 = g(v3, v4, v9, v14, m14, m15)
	// round 1
	v0, v4, v8, v12 = g(v0, v4, v8, v12, m2, m6)
	v1, v5, v9, v13 = g(v1, v5, v9, v13, m3, m10)
	v2, v6, v10, v14 = g(v2, v6, v10, v14, m7, m0)
	v3, v7, v11, v15 = g(v3, v7, v11, v15, m4, m13)
	v0, v5, v10, v15 = g(v0, v5, v10, v15, m1, m11)
	v1, v6, v11, v12 = g(v1, v6, v11, v12, m12, m5)
	v2, v7, v8, v13 = g(v2, v7, v8, v13, m9, m14)
	v3, v4, v9, v14 = g(v3, v4, v9, v14, m15, m8)
	// round 2
	v0, v4, v8, v12 = g(v0, v4, v8, v12, m3, m4)
	v1, v5, v9, v13 = g(v1, v5, v9, v13, m10, m12)
	v2, v6, v10, v14 = g(v2, v6, v10, v14, m13, m2)
	v3, v7, v11, v15 = g(v3, v7, v11, v15, m7, m14)
	v0, v5, v10, v15 = g(v0, v5, v10, v15, m6, m5)
	v1, v6, v11, v12 = g(v1, v6, v11, v12, m9, m0)
	v2, v7, v8, v13 = g(v2, v7, v8, v13, m11, m15)
	v3, v4, v9, v14 = g(v3, v4, v9, v14, m8, m1)
	// round 3
	v0, v4, v8, v12 = g(v0, v4, v8, v12, m10, m7)
	v1, v5, v9, v13 = g(v1, v5, v9, v13, m12, m9)
	v2, v6, v10, v14 = g(v2, v6, v10, v14, m14, m3)
	v3, v7, v11, v15 = g(v3, v7, v11, v15, m13, m15)
	v0, v5, v10, v15 = g(v0, v5, v10, v15, m4, m0)
	v1, v6, v11, v12 = g(v1, v6, v11, v12, m11, m2)
	v2, v7, v8, v13 = g(v2, v7, v8, v13, m5, m8)
	v3, v4, v9, v14 = g(v3, v4, v9, v14, m1, m6)
	// round 4
	v0, v4, v8, v12 = g(v0, v4, v8, v12, m12, m13)
	v1, v5, v9, v13 = g(v1, v5, v9, v13, m9, m11)
	v2, v6, v10, v14 = g(v2, v6, v10, v14, m15, m10)
	v3, v7, v11, v15 = g(v3, v7, v11, v15, m14, m8)
	v0, v5, v10, v15 = g(v0, v5, v10, v15, m7, m2)
	v1, v6, v11, v12 = g(v1, v6, v11, v12, m5, m3)
	v2, v7, v8, v13 = g(v2, v7, v8, v13, m0, m1)
	v3, v4, v9, v14 = g(v3, v4, v9, v14, m6, m4)
	// round 5
	v0, v4, v8, v12 = g(v0, v4, v8, v12, m9, m14)
	v1, v5, v9, v13 = g(v1, v5, v9, v13, m11, m5)
	v2, v6, v10, v14 = g(v2, v6, v10, v14, m8, m12)
	v3, v7, v11, v15 = g(v3, v7, v11, v15, m15, m1)
	v0, v5, v10, v15 = g(v0, v5, v10, v15, m13, m3)
	v1, v6, v11, v12 = g(v1, v6, v11, v12, m0, m10)
	v2, v7, v8, v13 = g(v2, v7, v8, v13, m2, m6)
	v3, v4, v9, v14 = g(v3, v4, v9, v14, m4, m7)
	// round 6
	v0, v4, v8, v12 = g(v0, v4, v8, v12, m11, m15)
	v1, v5, v9, v13 = g(v1, v5, v9, v13, m5, m0)
	v2, v6, v10, v14 = g(v2, v6, v10, v14, m1, m9)
	v3, v7, v11, v15 = g(v3, v7, v11, v15, m8, m6)
	v0, v5, v10, v15 = g(v0, v5, v10, v15, m14, m10)
	v1, v6, v11, v12 = g(v1, v6, v11, v12, m2, m12)
	v2, v7, v8, v13 = g(v2, v7, v8, v13, m3, m4)
	v3, v4, v9, v14 = g(v3, v4, v9, v14, m7, m13)
	return [16]uint32{v0 ^ v8, v1 ^ v9, v2 ^ v10, v3 ^ v11, v4 ^ v12, v5 ^ v13, v6 ^ v14, v7 ^ v15,
		v8, v9, v10, v11, v12, v13, v14, v15}
}

// g is BLAKE3's quarter-round on one column or diagonal.
func g(a, b, c, d, x, y uint32) (uint32, uint32, uint32, uint32) {
	a += b + x
	d = bits.RotateLeft32(d^a, -16)
	c += d
	b = bits.RotateLeft32(b^c, -12)
	a += b + y
	d = bits.RotateLeft32(d^a, -8)
	c += d
	b = bits.RotateLeft32(b^c, -7)
	return a, b, c, d
}

// words reads a block of up to 64 bytes as 16 little-endian words, zero
// padded.
func words(b []byte) (m [16]uint32) {
	var blk [blockLen]byte
	copy(blk[:], b)
	for i := range m {
		m[i] = binary.LittleEndian.Uint32(blk[4*i:])
	}
	return m
}

// output is a compression not yet performed: the last one of a chunk or of
// a parent, which becomes either a chaining value or the root.
type output struct {
	cv      [8]uint32
	m       [16]uint32
	counter uint64
	blen    uint32
	flags   uint32
}

func (o *output) chain() (cv [8]uint32) {
	v := compress(&o.cv, &o.m, o.counter, o.blen, o.flags)
	copy(cv[:], v[:8])
	return cv
}

func (o *output) root() (d [Size]byte) {
	v := compress(&o.cv, &o.m, 0, o.blen, o.flags|flagRoot)
	for i := 0; i < 8; i++ {
		binary.LittleEndian.PutUint32(d[4*i:], v[i])
	}
	return d
}

func parentOutput(l, r *[8]uint32) output {
	o := output{cv: iv, blen: blockLen, flags: flagPar}
	copy(o.m[:8], l[:])
	copy(o.m[8:], r[:])
	return o
}

func cvBytes(b []byte) (cv [8]uint32) {
	for i := range cv {
		cv[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return cv
}
