//go:build amd64 && !purego

package b3

import (
	"os"

	"golang.org/x/sys/cpu"
)

//go:generate go run ./internal/asmgen -out hash_amd64.s

// cpuWide says whether the AVX-512 kernel can run here: AVX-512 F and VL,
// unless MUSER_ISA caps the process at avx2 or generic (the variable
// infer/kernels reads; it warns about values it does not know).
var cpuWide = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && !capped(os.Getenv("MUSER_ISA"))

// useWide says whether hashMany runs the assembly kernel (tests turn it
// off to run the tree code on the portable one).
var useWide = cpuWide

func capped(isa string) bool { return isa == "avx2" || isa == "generic" }

// hashMany16 is hashManyGo in AVX-512 assembly, one lane a dword of each
// ZMM register.
//
//go:noescape
func hashMany16(in *[lanes]*byte, nblocks int, key *[8]uint32, ctr *[2 * lanes]uint32, flags, start, end uint32, out *[lanes][Size]byte)

func hashMany(in *[lanes]*byte, nblocks int, key *[8]uint32, ctr *[2 * lanes]uint32, flags, start, end uint32, out *[lanes][Size]byte) {
	if useWide {
		hashMany16(in, nblocks, key, ctr, flags, start, end, out)
		return
	}
	hashManyGo(in, nblocks, key, ctr, flags, start, end, out)
}
