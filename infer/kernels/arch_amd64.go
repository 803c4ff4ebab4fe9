package kernels

import (
	"github.com/muserhq/muser/infer/ggml"
	"golang.org/x/sys/cpu"
)

var bestISA = func() ISA {
	x := cpu.X86
	switch {
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI && x.HasAVX2 && x.HasFMA:
		return ISAAVX512
	case x.HasAVX2 && x.HasFMA:
		return ISAAVX2
	}
	return ISAGeneric
}()

func archImpl(ggml.Type) matmulImpl { return nil }
