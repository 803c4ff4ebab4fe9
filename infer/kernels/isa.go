package kernels

import (
	"fmt"
	"os"

	"github.com/muserhq/muser/infer/ggml"
)

// NumericsVersion numbers the canonical orders of operations documented in
// doc.go. It changes whenever any kernel's result can change; the engine
// includes it in the "engine" field of the pack identity.
const NumericsVersion = 2

// ISA names an instruction-set variant of the kernels. Every variant
// computes bit-identical results; the variant only changes speed.
type ISA int

// The kernel variants, slowest first.
const (
	ISAGeneric ISA = iota // portable Go
	ISAAVX2               // amd64 AVX2 + FMA + F16C (see doc.go for what has AVX2 code)
	ISAAVX512             // amd64 AVX-512 F/BW/DQ/VL + VNNI
	ISAAMX                // ISAAVX512 + AMX int8 tiles (Linux: with the kernel's permission)
)

// String returns the variant's name.
func (i ISA) String() string {
	switch i {
	case ISAGeneric:
		return "generic"
	case ISAAVX2:
		return "avx2"
	case ISAAVX512:
		return "avx512"
	case ISAAMX:
		return "amx"
	}
	return "unknown"
}

// isa is the variant in use: the best the CPU has, or what SetISA chose.
var isa = bestISA

// The environment variable MUSER_ISA (generic, avx2, avx512 or amx)
// caps the variants this process uses, for operators who compare them
// (the results are the same bits) or avoid one; an unknown name is
// reported on stderr and ignored.
func init() {
	s := os.Getenv("MUSER_ISA")
	if s == "" {
		return
	}
	for v := ISAGeneric; v <= ISAAMX; v++ {
		if v.String() == s {
			bestISA = min(bestISA, v)
			isa = bestISA
			return
		}
	}
	fmt.Fprintf(os.Stderr, "muser: MUSER_ISA=%q is not one of generic, avx2, avx512, amx: ignored\n", s)
}

// CurrentISA returns the variant the kernels use now.
func CurrentISA() ISA { return isa }

// SetISA makes the kernels use variant v, which must be one the CPU
// supports (at most BestISA()); it returns the previous variant. It is a
// knob for tests and benchmarks, which compare variants bit for bit; it is
// not safe to call while kernels run.
func SetISA(v ISA) ISA {
	if v > bestISA || v < 0 {
		v = bestISA
	}
	old := isa
	isa = v
	return old
}

// BestISA returns the fastest variant this CPU supports.
func BestISA() ISA { return bestISA }

// matmulImpl computes rows [r0,r1) of y for every token of a.
type matmulImpl func(y []float32, m *Matrix, a *acts, r0, r1 int)

// pickImpl returns the implementation for t under the current variant.
func pickImpl(t ggml.Type) matmulImpl {
	if f := archImpl(t); f != nil {
		return f
	}
	return matmulGeneric
}
