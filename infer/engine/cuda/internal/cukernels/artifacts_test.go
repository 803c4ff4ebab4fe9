package cukernels

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The artifact checks: what the build script runs on freshly built
// artifacts before it installs them (MUSER_CUKERNELS_DIR names their
// directory), and what CI runs on the embedded ones. The SASS check needs
// nvdisasm (CUDA toolkit); it is skipped without it unless
// MUSER_REQUIRE_NVDISASM=1.

type artifactSet struct {
	where               string
	cubin, ptx, mantext []byte
}

func loadArtifacts(t *testing.T) artifactSet {
	t.Helper()
	dir := os.Getenv("MUSER_CUKERNELS_DIR")
	if dir == "" {
		return artifactSet{where: "embedded", cubin: cubin, ptx: ptx, mantext: manifestText}
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return artifactSet{where: dir, cubin: read("muser_sm90.cubin"), ptx: read("muser_compute90.ptx"), mantext: read("manifest.txt")}
}

func TestArtifacts(t *testing.T) {
	a := loadArtifacts(t)
	m, err := ParseManifest(a.mantext)
	if err != nil {
		t.Fatalf("%s manifest: %v", a.where, err)
	}
	t.Run("digests", func(t *testing.T) {
		for _, c := range []struct {
			art  Artifact
			name string
			data []byte
		}{{m.Cubin, "muser_sm90.cubin", a.cubin}, {m.PTX, "muser_compute90.ptx", a.ptx}} {
			if c.art.Name != c.name {
				t.Errorf("manifest names %q, want %q", c.art.Name, c.name)
			}
			if got := DigestBytes(c.data); got != c.art.Digest || int64(len(c.data)) != c.art.Size {
				t.Errorf("%s: %s is %s (%d bytes), the manifest says %s (%d bytes): run scripts/cuda/build-kernels.sh",
					a.where, c.name, got, len(c.data), c.art.Digest, c.art.Size)
			}
		}
	})
	mod, err := parsePTX(a.ptx)
	if err != nil {
		t.Fatalf("%s PTX: %v", a.where, err)
	}
	t.Run("kernels", func(t *testing.T) {
		var entries, table []string
		for name := range mod.entries {
			entries = append(entries, name)
		}
		slices.Sort(entries)
		for _, k := range kernelTable {
			table = append(table, k.Name)
		}
		if !slices.Equal(entries, m.Kernels) {
			t.Errorf("the PTX's entries %v differ from the manifest's kernels %v", entries, m.Kernels)
		}
		if !slices.Equal(entries, table) {
			t.Errorf("the PTX's entries differ from launch.go's table:\n only in PTX: %v\n only in the table: %v",
				minus(entries, table), minus(table, entries))
		}
	})
	t.Run("abi", func(t *testing.T) {
		for _, k := range kernelTable {
			e, ok := mod.entries[k.Name]
			if !ok {
				continue // reported by "kernels"
			}
			if err := paramsMatch(e.params, k.Params); err != nil {
				t.Errorf("%s: launch.go's parameters %v against the PTX's %v: %v", k.Name, k.Params, e.params, err)
			}
		}
	})
	t.Run("builders", func(t *testing.T) {
		for _, l := range sampleLaunches(t) {
			e, ok := mod.entries[l.Kernel]
			if !ok {
				t.Errorf("a builder launches %q, which the PTX does not have", l.Kernel)
				continue
			}
			if err := argsMatch(e.params, l.Args); err != nil {
				t.Errorf("%s: builder arguments %#v against the PTX's %v: %v", l.Kernel, l.Args, e.params, err)
			}
		}
	})
	t.Run("ptx", func(t *testing.T) {
		for _, f := range checkPTX(mod) {
			t.Error(f)
		}
	})
	t.Run("sass", func(t *testing.T) {
		sass := disassemble(t, a.cubin)
		fns := parseSASS(sass)
		for _, f := range checkSASS(fns) {
			t.Error(f)
		}
	})
}

func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// PTX.

type ptxFunc struct {
	name   string
	entry  bool
	params []string // entries: the parameter types (".u64", ".u32", ".f32", …)
	body   []string // the instruction lines
}

type ptxModule struct {
	entries map[string]*ptxFunc
	funcs   []*ptxFunc // entries and .func, in file order
}

var (
	ptxHeader = regexp.MustCompile(`^(?:\.visible\s+|\.weak\s+)?(\.entry|\.func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][A-Za-z0-9_$]*)\s*\(?`)
	ptxParam  = regexp.MustCompile(`^\s*\.param\s+(?:\.align\s+\d+\s+)?(\.[a-z0-9]+)\s+(?:\.ptr[^ ]*\s+)*[A-Za-z_$][A-Za-z0-9_$]*(\[\d+\])?\s*,?$`)
)

// parsePTX splits PTX text into its functions: each header, its parameter
// list, and its body up to the brace that closes it.
func parsePTX(text []byte) (*ptxModule, error) {
	m := &ptxModule{entries: map[string]*ptxFunc{}}
	lines := strings.Split(string(text), "\n")
	for i := 0; i < len(lines); i++ {
		h := ptxHeader.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if h == nil {
			continue
		}
		f := &ptxFunc{name: h[2], entry: h[1] == ".entry"}
		// Parameters until ")" at the start of a line (an entry's list).
		j := i + 1
		if f.entry {
			for ; j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), ")"); j++ {
				l := strings.TrimSpace(lines[j])
				if l == "" {
					continue
				}
				pm := ptxParam.FindStringSubmatch(l)
				if pm == nil {
					return nil, fmt.Errorf("%s: parameter line %q", f.name, l)
				}
				typ := pm[1]
				if pm[2] != "" {
					typ += pm[2]
				}
				f.params = append(f.params, typ)
			}
		}
		// The body: from the first "{" to the matching "}".
		for ; j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "{"); j++ {
			if strings.HasSuffix(strings.TrimSpace(lines[j]), ";") { // a declaration without a body
				break
			}
		}
		if j == len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[j]), "{") {
			i = j
			continue
		}
		depth := 0
		for ; j < len(lines); j++ {
			l := lines[j]
			depth += strings.Count(l, "{") - strings.Count(l, "}")
			f.body = append(f.body, l)
			if depth == 0 {
				break
			}
		}
		if depth != 0 {
			return nil, fmt.Errorf("%s: body does not close", f.name)
		}
		i = j
		m.funcs = append(m.funcs, f)
		if f.entry {
			if m.entries[f.name] != nil {
				return nil, fmt.Errorf("entry %s twice", f.name)
			}
			m.entries[f.name] = f
		}
	}
	if len(m.entries) == 0 {
		return nil, fmt.Errorf("no .entry")
	}
	return m, nil
}

// paramsMatch compares PTX parameter types with launch.go's.
func paramsMatch(ptx []string, want []Param) error {
	if len(ptx) != len(want) {
		return fmt.Errorf("%d parameters, want %d", len(ptx), len(want))
	}
	for i, p := range want {
		var ok bool
		switch p {
		case Ptr:
			ok = ptx[i] == ".u64" || ptx[i] == ".b64" || ptx[i] == ".s64"
		case I32:
			ok = ptx[i] == ".u32" || ptx[i] == ".s32" || ptx[i] == ".b32"
		case F32:
			ok = ptx[i] == ".f32"
		}
		if !ok {
			return fmt.Errorf("parameter %d is %s, want %v", i, ptx[i], p)
		}
	}
	return nil
}

// argsMatch compares a builder's arguments with PTX parameter types.
func argsMatch(ptx []string, args []any) error {
	if len(ptx) != len(args) {
		return fmt.Errorf("%d arguments, the kernel takes %d", len(args), len(ptx))
	}
	for i, a := range args {
		var p Param
		switch a.(type) {
		case uint64:
			p = Ptr
		case int32, uint32:
			p = I32
		case float32:
			p = F32
		default:
			return fmt.Errorf("argument %d has type %T", i, a)
		}
		if err := paramsMatch(ptx[i:i+1], []Param{p}); err != nil {
			return fmt.Errorf("argument %d (%T): %v", i, a, err)
		}
	}
	return nil
}

func (p Param) String() string {
	switch p {
	case Ptr:
		return "ptr"
	case I32:
		return "i32"
	case F32:
		return "f32"
	}
	return fmt.Sprintf("Param(%d)", uint8(p))
}

var (
	ptxFloatType = regexp.MustCompile(`^(f16|f16x2|bf16|bf16x2|f32|f64)$`)
	ptxRounding  = regexp.MustCompile(`^(rn|rz|rm|rp)$`)
)

// checkPTX returns every finding of the PTX rules: a float add, sub or mul
// without an explicit rounding mode (a JIT may contract it into an FMA);
// a float fma or mad outside the ExactFMA kernels; any approximate
// (.approx), flush-to-zero (.ftz) or div.full instruction; an entry
// without griddepcontrol.wait, or with a store, an atomic or a load
// through the read-only cache before it (common.cuh's grid_wait: the
// engine launches every kernel of a graph early).
func checkPTX(m *ptxModule) []string {
	exact := map[string]bool{}
	for _, k := range kernelTable {
		exact[k.Name] = k.ExactFMA
	}
	var out []string
	for _, f := range m.funcs {
		if f.entry {
			out = append(out, checkEarlyWait(f)...)
		}
		for _, l := range f.body {
			op := ptxOpcode(l)
			if op == "" {
				continue
			}
			parts := strings.Split(op, ".")
			base, mods := parts[0], parts[1:]
			isFloat := false
			for _, p := range mods {
				if ptxFloatType.MatchString(p) {
					isFloat = true
				}
			}
			has := func(re *regexp.Regexp) bool {
				for _, p := range mods {
					if re.MatchString(p) {
						return true
					}
				}
				return false
			}
			switch {
			case slices.Contains(mods, "approx") || slices.Contains(mods, "ftz") || base == "div" && slices.Contains(mods, "full"):
				out = append(out, fmt.Sprintf("PTX %s: approximate or flush-to-zero math: %s", f.name, strings.TrimSpace(l)))
			case isFloat && (base == "add" || base == "sub" || base == "mul") && !has(ptxRounding):
				out = append(out, fmt.Sprintf("PTX %s: %s has no rounding mode (a JIT may fuse it): %s", f.name, op, strings.TrimSpace(l)))
			case isFloat && (base == "fma" || base == "mad") && !(f.entry && exact[f.name]):
				out = append(out, fmt.Sprintf("PTX %s: %s outside the ExactFMA kernels: %s", f.name, op, strings.TrimSpace(l)))
			}
		}
	}
	return out
}

// checkEarlyWait returns the findings of the early-launch rule in entry
// f: griddepcontrol.wait present, and before its first occurrence (the
// kernels call grid_wait once, in straight-line code at their start) no
// store, atomic or reduction, and no ld.global.nc (memory another kernel
// of the graph may write: only plain loads of immutable data belong
// there).
func checkEarlyWait(f *ptxFunc) []string {
	var out []string
	for _, l := range f.body {
		op := ptxOpcode(l)
		if op == "griddepcontrol.wait" {
			return out
		}
		parts := strings.Split(op, ".")
		switch {
		case parts[0] == "st" || parts[0] == "atom" || parts[0] == "red":
			out = append(out, fmt.Sprintf("PTX %s: %s before griddepcontrol.wait: %s", f.name, op, strings.TrimSpace(l)))
		case parts[0] == "ld" && slices.Contains(parts, "nc"):
			out = append(out, fmt.Sprintf("PTX %s: read-only-cache load %s before griddepcontrol.wait: %s", f.name, op, strings.TrimSpace(l)))
		}
	}
	return append(out, fmt.Sprintf("PTX %s: no griddepcontrol.wait (every kernel calls grid_wait before it touches what other kernels write)", f.name))
}

var ptxInstr = regexp.MustCompile(`^\s*(?:@!?%[a-z0-9_]+\s+)?([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*)[\s;]`)

// ptxOpcode returns the opcode of an instruction line ("add.rn.f32"), or
// "" for declarations, labels, braces and comments.
func ptxOpcode(line string) string {
	l := strings.TrimSpace(line)
	if l == "" || strings.HasPrefix(l, ".") || strings.HasPrefix(l, "//") || strings.HasPrefix(l, "{") || strings.HasPrefix(l, "}") || strings.HasSuffix(l, ":") {
		return ""
	}
	m := ptxInstr.FindStringSubmatch(l + " ")
	if m == nil {
		return ""
	}
	return m[1]
}

// ---------------------------------------------------------------------------
// SASS.

// disassemble runs nvdisasm on the cubin.
func disassemble(t *testing.T, cubinData []byte) string {
	t.Helper()
	nv, err := exec.LookPath("nvdisasm")
	if err != nil {
		if os.Getenv("MUSER_REQUIRE_NVDISASM") == "1" {
			t.Fatalf("nvdisasm not found and MUSER_REQUIRE_NVDISASM=1: %v", err)
		}
		t.Skipf("nvdisasm not found (%v): the SASS check needs the CUDA toolkit", err)
	}
	p := filepath.Join(t.TempDir(), "k.cubin")
	if err := os.WriteFile(p, cubinData, 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(nv, "-c", p)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nvdisasm: %v\n%s", err, stderr.Bytes())
	}
	return string(out)
}

type sassFunc struct {
	name   string   // "kernel" or "$kernel$subroutine"
	instrs []string // "OPCODE operands"
}

var (
	sassType  = regexp.MustCompile(`^\s*\.type\s+([^,\s]+),@function`)
	sassInstr = regexp.MustCompile(`^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);`)
)

// parseSASS splits nvdisasm -c output into functions and instructions.
func parseSASS(text string) []*sassFunc {
	var fns []*sassFunc
	var cur *sassFunc
	for _, l := range strings.Split(text, "\n") {
		if m := sassType.FindStringSubmatch(l); m != nil {
			cur = &sassFunc{name: m[1]}
			fns = append(fns, cur)
			continue
		}
		if m := sassInstr.FindStringSubmatch(l); m != nil && cur != nil {
			cur.instrs = append(cur.instrs, m[1]+" "+strings.TrimSpace(m[2]))
		}
	}
	return fns
}

var (
	// The IEEE division and square-root code: muser's non-inlined
	// helpers (common.cuh) and the CUDA library routines they call.
	sassExactHelper = regexp.MustCompile(`^\$[A-Za-z0-9_]+\$(muser_fdiv_rn|muser_ddiv_rn|muser_dsqrt_rn|__cuda_sm[0-9]+x?_(div|ddiv|dsqrt|sqrt|rcp|drcp|drsqrt)[A-Za-z0-9_]*)$`)
	// A constant materialized through the half-precision FMA unit:
	// 0 × 0 + immediate, not arithmetic.
	sassConstMove = regexp.MustCompile(`^HFMA2(\.MMA)? R[0-9]+, -?RZ, -?RZ, [^,]+, [^,]+$`)
)

// checkSASS returns every finding of the SASS rules: FFMA only in the
// ExactFMA kernels and the IEEE helpers, DFMA and HFMA only in the
// helpers (HFMA2 constant moves aside), IMMA in every TensorCores kernel,
// every kernel present.
func checkSASS(fns []*sassFunc) []string {
	byName := map[string]*sassFunc{}
	for _, f := range fns {
		byName[f.name] = f
	}
	var out []string
	for _, k := range kernelTable {
		f := byName[k.Name]
		if f == nil {
			out = append(out, fmt.Sprintf("SASS: no function %s", k.Name))
			continue
		}
		if k.TensorCores && !slices.ContainsFunc(f.instrs, func(s string) bool { return strings.HasPrefix(s, "IMMA") }) {
			out = append(out, fmt.Sprintf("SASS %s: no IMMA (integer tensor core) instruction", k.Name))
		}
	}
	exact := map[string]bool{}
	for _, k := range kernelTable {
		exact[k.Name] = k.ExactFMA
	}
	for _, f := range fns {
		helper := sassExactHelper.MatchString(f.name)
		for _, in := range f.instrs {
			op, _, _ := strings.Cut(in, " ")
			isF := strings.HasPrefix(op, "FFMA")
			isD := strings.HasPrefix(op, "DFMA")
			isH := strings.HasPrefix(op, "HFMA")
			switch {
			case !isF && !isD && !isH, helper:
			case isH && sassConstMove.MatchString(in):
			case isF && exact[f.name]:
			default:
				out = append(out, fmt.Sprintf("SASS %s: %s outside the ExactFMA kernels and the division helpers", f.name, in))
			}
		}
	}
	return out
}
