package cu

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestKernelsAssemble assembles testdata/kernels.ptx and early.ptx, the
// GPU tests' hand-written kernels, with ptxas where a CUDA toolkit is installed, so a
// mistake in them shows on machines without a GPU.
func TestKernelsAssemble(t *testing.T) {
	ptxas, err := exec.LookPath("ptxas")
	if err != nil {
		t.Skip("no ptxas in PATH")
	}
	for _, c := range []struct{ file, arch string }{
		{"kernels.ptx", "sm_80"}, {"kernels.ptx", "sm_90"}, {"early.ptx", "sm_90"},
	} {
		t.Run(c.file+"/"+c.arch, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "k.cubin")
			src := filepath.Join("testdata", c.file)
			if msg, err := exec.Command(ptxas, "-arch="+c.arch, "-o", out, src).CombinedOutput(); err != nil {
				t.Fatalf("ptxas -arch=%s %s: %v\n%s", c.arch, src, err, msg)
			}
		})
	}
}

// emCUDA is the ELF machine of CUDA cubins (EM_CUDA).
const emCUDA = 190

// TestCubinKernels checks that testdata/kernels.sm_90.cubin is a 64-bit
// little-endian CUDA ELF with a .text section for each kernel of
// testdata/kernels.ptx. (debug/elf refuses cubins: their e_ident version
// byte holds the CUDA ABI version, not EV_CURRENT.)
func TestCubinKernels(t *testing.T) {
	b := kernelsSM90
	if len(b) < 64 || !bytes.Equal(b[:4], []byte(elf.ELFMAG)) {
		t.Fatalf("kernels.sm_90.cubin (%d bytes) is not ELF", len(b))
	}
	if elf.Class(b[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(b[elf.EI_DATA]) != elf.ELFDATA2LSB {
		t.Errorf("class %v, data %v; want ELFCLASS64, ELFDATA2LSB", elf.Class(b[elf.EI_CLASS]), elf.Data(b[elf.EI_DATA]))
	}
	if m := binary.LittleEndian.Uint16(b[18:]); m != emCUDA {
		t.Errorf("e_machine %d, want EM_CUDA (%d)", m, emCUDA)
	}
	for _, k := range []string{"add_one", "echo", "reverse_shared", "empty"} {
		if !bytes.Contains(b, []byte(".text."+k+"\x00")) {
			t.Errorf("kernels.sm_90.cubin has no section .text.%s", k)
		}
	}
}
