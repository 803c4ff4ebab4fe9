package cukernels

import (
	"strings"
	"testing"
)

// The artifact checks' own tests: each rule fires on a hand-written
// violation and stays quiet on what the compiler legitimately emits.

const ptxSample = `
.version 7.8
.target sm_90
.func  (.param .b32 func_retval0) muser_fdiv_rn(
	.param .b32 muser_fdiv_rn_param_0,
	.param .b32 muser_fdiv_rn_param_1
)
{
	.reg .f32 	%f<4>;
	ld.param.f32 	%f1, [muser_fdiv_rn_param_0];
	div.rn.f32 	%f3, %f1, %f2;
	ret;
}
.visible .entry muser_add(
	.param .u64 muser_add_param_0,
	.param .u64 muser_add_param_1,
	.param .u64 muser_add_param_2,
	.param .u32 muser_add_param_3
)
.maxntid 256, 1, 1
{
	.reg .f32 	%f<4>;
	ld.global.u16 	%rs1, [%rd2];
	// begin inline asm
	griddepcontrol.wait;
	// end inline asm
	@%p1 bra 	$L__BB0_2;
	add.rn.f32 	%f3, %f1, %f2;
	st.global.v4.f32 	[%rd1], {%f1, %f2, %f3, %f3};
	{ // inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r1,%r2,%r3,%r4}, {%r5,%r6,%r7,%r8}, {%r9,%r10}, {%r11,%r11,%r11,%r11};
	}
$L__BB0_2:
	ret;
}
.visible .entry muser_mmf_f16(
	.param .u64 muser_mmf_f16_param_0,
	.param .f32 muser_mmf_f16_param_1
)
{
	griddepcontrol.wait;
	fma.rn.f32 	%f3, %f1, %f2, %f3;
	ret;
}
`

func TestParsePTX(t *testing.T) {
	m, err := parsePTX([]byte(ptxSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.funcs) != 3 || len(m.entries) != 2 {
		t.Fatalf("got %d functions, %d entries; want 3, 2", len(m.funcs), len(m.entries))
	}
	if got := strings.Join(m.entries["muser_add"].params, " "); got != ".u64 .u64 .u64 .u32" {
		t.Errorf("muser_add parameters %q, want .u64 .u64 .u64 .u32", got)
	}
	if got := m.entries["muser_add"].body[len(m.entries["muser_add"].body)-1]; strings.TrimSpace(got) != "}" {
		t.Errorf("muser_add's body ends with %q, want the closing brace", got)
	}
	if f := checkPTX(m); len(f) != 0 {
		t.Errorf("findings on clean PTX: %v", f)
	}
	if _, err := parsePTX([]byte(".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\tret;\n")); err == nil {
		t.Error("an unclosed body parses")
	}
}

func TestCheckPTXRules(t *testing.T) {
	tests := []struct {
		name, from, to, want string
	}{
		{"add without rounding", "add.rn.f32 	%f3", "add.f32 	%f3", "no rounding mode"},
		{"f64 mul without rounding", "add.rn.f32 	%f3", "mul.f64 	%fd3", "no rounding mode"},
		{"fma outside ExactFMA", "add.rn.f32 	%f3, %f1, %f2;", "fma.rn.f32 	%f3, %f1, %f2, %f3;", "outside the ExactFMA"},
		{"fma in a helper", "div.rn.f32 	%f3, %f1, %f2;", "fma.rn.f32 	%f3, %f1, %f2, %f2;", "outside the ExactFMA"},
		{"approx", "add.rn.f32 	%f3", "ex2.approx.f32 	%f3", "approximate"},
		{"ftz", "add.rn.f32 	%f3", "add.rn.ftz.f32 	%f3", "flush-to-zero"},
		{"div.full", "div.rn.f32", "div.full.f32", "approximate"},
		{"predicated", "add.rn.f32 	%f3", "@!%p2 mul.f32 	%f3", "no rounding mode"},
		{"no wait", "	griddepcontrol.wait;\n	fma", "	fma", "no griddepcontrol.wait"},
		{"store before the wait", "	ld.global.u16 	%rs1, [%rd2];", "	st.global.f32 	[%rd2], %f1;", "st.global.f32 before griddepcontrol.wait"},
		{"read-only load before the wait", "	ld.global.u16 	%rs1, [%rd2];", "	ld.global.nc.u16 	%rs1, [%rd2];", "read-only-cache load"},
		{"atomic before the wait", "	ld.global.u16 	%rs1, [%rd2];", "	atom.global.add.u32 	%r1, [%rd2], 1;", "atom.global.add.u32 before"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(ptxSample, tc.from, tc.to, 1)
			if src == ptxSample {
				t.Fatal("test case does not change the PTX")
			}
			m, err := parsePTX([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			f := checkPTX(m)
			if len(f) != 1 || !strings.Contains(f[0], tc.want) {
				t.Errorf("findings %q, want one mentioning %q", f, tc.want)
			}
		})
	}
}

func TestParamsMatch(t *testing.T) {
	if err := paramsMatch([]string{".u64", ".u32", ".s32", ".f32"}, []Param{Ptr, I32, I32, F32}); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]string{{".u64", ".u32", ".s32"}, {".u32", ".u32", ".s32", ".f32"}, {".u64", ".f32", ".s32", ".f32"}, {".u64", ".u32", ".s32", ".u32"}} {
		if paramsMatch(bad, []Param{Ptr, I32, I32, F32}) == nil {
			t.Errorf("%v matches ptr i32 i32 f32", bad)
		}
	}
	if err := argsMatch([]string{".u64", ".u32", ".f32"}, []any{uint64(1), int32(2), float32(3)}); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]any{{1, int32(2), float32(3)}, {uint64(1), int64(2), float32(3)}, {uint64(1), int32(2), float64(3)}, {uint64(1), int32(2)}} {
		if argsMatch([]string{".u64", ".u32", ".f32"}, bad) == nil {
			t.Errorf("%#v matches .u64 .u32 .f32", bad)
		}
	}
}

// sassFor returns nvdisasm-style text for functions of instructions.
func sassFor(fns map[string][]string) string {
	var b strings.Builder
	for name, ins := range fns {
		b.WriteString("        .type           " + name + ",@function\n")
		b.WriteString(name + ":\n")
		for i, in := range ins {
			b.WriteString("        /*" + strings.Repeat("0", 3) + string(rune('0'+i%10)) + "*/                   " + in + " ;\n")
		}
	}
	return b.String()
}

// cleanSASS is a module in which every kernel of the table is present and
// legitimate.
func cleanSASS() map[string][]string {
	fns := map[string][]string{}
	for _, k := range kernelTable {
		ins := []string{"MOV R1, c[0x0][0x28]", "HFMA2.MMA R18, -RZ, RZ, 0, 0", "FMUL R3, R4, R5", "@!P0 FADD R6, R3, R7"}
		if k.TensorCores {
			ins = append(ins, "IMMA.16832.S8.S8 R40, R32.ROW, R70.COL, RZ")
		}
		if k.ExactFMA {
			ins = append(ins, "FFMA R8, R9, R10, R8")
		}
		ins = append(ins, "EXIT")
		fns[k.Name] = ins
	}
	fns["$muser_rmsnorm$muser_fdiv_rn"] = []string{"MUFU.RCP R6, R3", "FFMA R5, -R3, R6, 1", "RET.REL.NODEC R20 0x0"}
	fns["$muser_rmsnorm$__cuda_sm20_div_f64_slowpath_v2"] = []string{"DFMA R8, -R6, R2, 1", "FFMA R8, RZ, R7, R3"}
	return fns
}

func TestCheckSASSRules(t *testing.T) {
	if f := checkSASS(parseSASS(sassFor(cleanSASS()))); len(f) != 0 {
		t.Fatalf("findings on clean SASS: %v", f)
	}
	tests := []struct {
		name string
		edit func(map[string][]string)
		want string
	}{
		{"ffma in a plain kernel", func(m map[string][]string) { m["muser_add"] = append(m["muser_add"], "FFMA R1, R2, R3, R4") }, "muser_add: FFMA"},
		{"predicated ffma", func(m map[string][]string) { m["muser_rope"] = append(m["muser_rope"], "@P1 FFMA.FTZ R1, R2, R3, R4") }, "muser_rope: FFMA.FTZ"},
		{"dfma in an ExactFMA kernel", func(m map[string][]string) { m["muser_mmf_f16"] = append(m["muser_mmf_f16"], "DFMA R2, R4, R6, R8") }, "muser_mmf_f16: DFMA"},
		{"hfma arithmetic", func(m map[string][]string) { m["muser_add"] = append(m["muser_add"], "HFMA2 R1, R2, R3, R4") }, "muser_add: HFMA2"},
		{"unknown subroutine", func(m map[string][]string) { m["$muser_add$my_helper"] = []string{"FFMA R1, R2, R3, R4"} }, "my_helper"},
		{"no tensor cores", func(m map[string][]string) { m["muser_mmq_q8_0"] = []string{"EXIT"} }, "no IMMA"},
		{"missing kernel", func(m map[string][]string) { delete(m, "muser_silu_mul") }, "no function muser_silu_mul"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := cleanSASS()
			tc.edit(m)
			f := checkSASS(parseSASS(sassFor(m)))
			if len(f) != 1 || !strings.Contains(f[0], tc.want) {
				t.Errorf("findings %q, want one containing %q", f, tc.want)
			}
		})
	}
}
