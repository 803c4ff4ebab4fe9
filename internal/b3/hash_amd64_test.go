//go:build amd64 && !purego

package b3

import (
	"math/rand/v2"
	"testing"
)

// TestKernelMatchesGo compares the assembly kernel with its portable
// definition lane by lane, with distinct inputs, counters past 2^32 and
// every flag input.
func TestKernelMatchesGo(t *testing.T) {
	if !cpuWide {
		t.Skip("no AVX-512 F and VL on this CPU (or MUSER_ISA caps it): the assembly kernel does not run here")
	}
	r := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, lanes*chunkLen)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	var key [8]uint32
	for i := range key {
		key[i] = r.Uint32()
	}
	for _, nb := range []int{1, 2, 15, 16} {
		var in [lanes]*byte
		var ctr [2 * lanes]uint32
		for i := range in {
			in[i] = &data[i*chunkLen]
			c := uint64(1)<<32 - 3 + uint64(i)
			ctr[i], ctr[lanes+i] = uint32(c), uint32(c>>32)
		}
		var got, want [lanes][Size]byte
		hashMany16(&in, nb, &key, &ctr, 0x40, 1, 2, &got)
		hashManyGo(&in, nb, &key, &ctr, 0x40, 1, 2, &want)
		if got != want {
			t.Fatalf("nblocks=%d: kernels differ:\n%x\n%x", nb, got, want)
		}
	}
}
