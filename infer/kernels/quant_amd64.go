package kernels

//go:noescape
func quantQ8_0AVX512(x *float32, nb int, q *int8, qu *uint8, d *float32, sums *int32, s *float32) int

//go:noescape
func quantQ8_KAVX512(x *float32, nb int, q *int8, d *float32, bs *int32, bs16 *int16) int

// quantQ8_0Arch quantizes as quantQ8_0 (and fills qu) with AVX-512 when the
// CPU has it; blocks holding a NaN take the Go code. It reports whether it
// did the work.
func quantQ8_0Arch(x []float32, q []int8, qu []uint8, d []float32, sums []int32, s []float32) bool {
	if isa < ISAAVX512 || len(d) == 0 {
		return false
	}
	for b := 0; b < len(d); {
		var sp *float32
		if s != nil {
			sp = &s[b]
		}
		b += quantQ8_0AVX512(&x[b*32], len(d)-b, &q[b*32], &qu[b*32], &d[b], &sums[b], sp)
		if b < len(d) { // a NaN: this block in Go
			var sb []float32
			if s != nil {
				sb = s[b : b+1]
			}
			quantQ8_0(x[b*32:b*32+32], q[b*32:b*32+32], d[b:b+1], sums[b:b+1], sb)
			for i := b * 32; i < b*32+32; i++ {
				qu[i] = uint8(q[i]) ^ 0x80
			}
			b++
		}
	}
	return true
}

// quantQ8_KArch is quantQ8_K (filling bs16 too) with AVX-512; see
// quantQ8_0Arch.
func quantQ8_KArch(x []float32, q []int8, d []float32, bs []int32, bs16 []int16) bool {
	if isa < ISAAVX512 || len(d) == 0 {
		return false
	}
	for b := 0; b < len(d); {
		b += quantQ8_KAVX512(&x[b*256], len(d)-b, &q[b*256], &d[b], &bs[b*16], &bs16[b*16])
		if b < len(d) {
			quantQ8_K(x[b*256:b*256+256], q[b*256:b*256+256], d[b:b+1], bs[b*16:b*16+16])
			for i := b * 16; i < b*16+16; i++ {
				bs16[i] = int16(bs[i])
			}
			b++
		}
	}
	return true
}
