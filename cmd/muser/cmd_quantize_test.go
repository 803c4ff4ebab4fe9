package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// quantizeCLI runs muser with args and returns its exit status and output.
func quantizeCLI(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(ctx, args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// quantizeStories returns the path of the shared stories260K model (all
// F32: rows of 64, and ffn_down's rows of 172), or skips.
func quantizeStories(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "models", "stories260K.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared test material %s not available: %v", p, err)
	}
	return p
}

// TestQuantizeStories quantizes stories260K to NVFP4 and Q8_0 and checks
// the tensors' types and bytes, the metadata, that the engine loads the
// result and runs it, and that the output is a pure function of the input.
func TestQuantizeStories(t *testing.T) {
	in := quantizeStories(t)
	src, err := gguf.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, tc := range []struct {
		typ      ggml.Type
		ftype    uint32
		fallback ggml.Type // ffn_down, rows of 172
	}{
		{ggml.TypeNVFP4, 39, ggml.TypeF16},
		{ggml.TypeQ8_0, 7, ggml.TypeF16},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out.gguf")
			code, stdout, stderr := quantizeCLI(t, context.Background(), "quantize", "--type", strings.ToLower(tc.typ.String()), in, out)
			if code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			if !strings.Contains(stdout, "32 "+tc.typ.String()) || !strings.Contains(stdout, "5 F16") {
				t.Errorf("summary %q lacks the 32 %v and 5 F16 matrices", stdout, tc.typ)
			}
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()

			// Tensors: matrices converted, vectors untouched, order kept.
			if len(f.Tensors) != len(src.Tensors) {
				t.Fatalf("%d tensors, want %d", len(f.Tensors), len(src.Tensors))
			}
			for i := range src.Tensors {
				s, g := &src.Tensors[i], &f.Tensors[i]
				want := s.Type
				if len(s.Shape) == 2 {
					want = tc.typ
					if s.Shape[0] == 172 {
						want = tc.fallback
					}
				}
				if g.Name != s.Name || g.Type != want {
					t.Errorf("tensor %d: %s %v, want %s %v", i, g.Name, g.Type, s.Name, want)
					continue
				}
				if want == s.Type {
					if !bytes.Equal(f.Data(g), src.Data(s)) {
						t.Errorf("%s: bytes of an unconverted tensor changed", s.Name)
					}
					continue
				}
				// A converted F32 matrix is exactly ggml.Quantize of it.
				x := make([]float32, s.Elements())
				if err := ggml.Dequantize(s.Type, src.Data(s), x); err != nil {
					t.Fatal(err)
				}
				wantBytes := make([]byte, g.Size)
				if err := ggml.Quantize(want, x, wantBytes); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(f.Data(g), wantBytes) {
					t.Errorf("%s: bytes differ from ggml.Quantize(%v)", s.Name, want)
				}
			}

			// Metadata: every key copied, file type and quantization
			// version set.
			for _, kv := range src.Meta.All() {
				v, ok := f.Meta.Get(kv.Key)
				if !ok || v.Summary(8) != kv.Value.Summary(8) {
					t.Errorf("metadata %s = %v, want %v", kv.Key, v.Summary(8), kv.Value.Summary(8))
				}
			}
			if ft, err := f.Meta.Uint32(gguf.KeyFileType); err != nil || ft != tc.ftype {
				t.Errorf("general.file_type = %d (%v), want %d", ft, err, tc.ftype)
			}
			if qv, err := f.Meta.Uint32("general.quantization_version"); err != nil || qv != 2 {
				t.Errorf("general.quantization_version = %d (%v), want 2", qv, err)
			}

			// The engine loads and runs it.
			m, err := engine.Open(out, engine.Options{Device: cpu.New(cpu.Options{Threads: 2})})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			seq, err := m.NewSequence(8)
			if err != nil {
				t.Fatal(err)
			}
			st := []engine.Step{{Seq: seq, Tokens: []int32{1, 403, 407, 261, 378}, Output: engine.OutputLast}}
			if err := m.Forward(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			if len(st[0].Logits) != m.Config().Vocab {
				t.Fatalf("%d logits, want %d", len(st[0].Logits), m.Config().Vocab)
			}
			for i, v := range st[0].Logits {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("logit %d is %v", i, v)
				}
			}

			// Deterministic: the same input gives the same bytes, and
			// quantizing the output again to the same type copies it.
			first, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ from, to string }{{in, "again.gguf"}, {out, "twice.gguf"}} {
				p := filepath.Join(dir, c.to)
				if code, _, stderr := quantizeCLI(t, context.Background(), "quantize", "--type", tc.typ.String(), c.from, p); code != exitOK {
					t.Fatalf("exit %d, stderr %q", code, stderr)
				}
				again, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again, first) {
					t.Errorf("quantize of %s gave different bytes from the first run", c.from)
				}
			}
		})
	}
}

// TestQuantizeErrors checks the exit status of each failure, and that OUT
// is never written by a failed run.
func TestQuantizeErrors(t *testing.T) {
	in := quantizeStories(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.gguf")
	if err := os.WriteFile(garbage, []byte("GGUF\x03\x00\x00\x00not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A matrix of a type muser cannot decode (IQ2_XS) cannot be converted.
	iq := filepath.Join(dir, "iq2.gguf")
	b := gguf.NewBuilder()
	b.SetString("general.architecture", "llama")
	b.AddTensor("blk.0.ffn_up.weight", ggml.TypeIQ2_XS, []int64{256, 2}, make([]byte, 2*74))
	if err := b.WriteFile(iq); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "existing.gguf")
	if err := os.WriteFile(existing, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		args   []string
		code   int
		stderr string // a substring the error must contain
	}{
		{"missing input", nil, []string{"quantize", "--type", "NVFP4", filepath.Join(dir, "none.gguf"), "OUT"}, exitNotFound, "none.gguf"},
		{"unknown type", nil, []string{"quantize", "--type", "Q9_9", in, "OUT"}, exitUsage, "Q9_9"},
		{"type it cannot write", nil, []string{"quantize", "--type", "Q6_K", in, "OUT"}, exitUsage, "Q6_K"},
		{"no type", nil, []string{"quantize", in, "OUT"}, exitUsage, "--type is required"},
		{"one argument", nil, []string{"quantize", "--type", "NVFP4", in}, exitUsage, "IN and OUT"},
		{"malformed input", nil, []string{"quantize", "--type", "NVFP4", garbage, "OUT"}, exitFailure, "garbage.gguf"},
		{"undecodable matrix", nil, []string{"quantize", "--type", "Q8_0", iq, "OUT"}, exitFailure, `iq2.gguf: tensor "blk.0.ffn_up.weight": type IQ2_XS cannot be decoded`},
		{"interrupted", canceled, []string{"quantize", "--type", "NVFP4", in, "OUT"}, exitSignal, "interrupted"},
		{"output exists", nil, []string{"quantize", "--type", "NVFP4", in, existing}, exitFailure, "--force"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.gguf")
			args := append([]string(nil), tc.args...)
			if args[len(args)-1] == "OUT" {
				args[len(args)-1] = out
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			code, _, stderr := quantizeCLI(t, ctx, args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.code, tc.stderr)
			}
			if entries, err := os.ReadDir(filepath.Dir(out)); err != nil || len(entries) != 0 {
				t.Errorf("a failed run left %d files in OUT's directory (%v)", len(entries), err)
			}
		})
	}
	if got, err := os.ReadFile(existing); err != nil || string(got) != "keep me" {
		t.Errorf("existing OUT changed without --force: %q, %v", got, err)
	}
	code, _, stderr := quantizeCLI(t, context.Background(), "quantize", "--type", "NVFP4", "--force", in, existing)
	if code != exitOK {
		t.Fatalf("--force: exit %d, stderr %q", code, stderr)
	}
	if f, err := gguf.Open(existing); err != nil {
		t.Errorf("--force did not replace OUT with a model: %v", err)
	} else {
		f.Close()
	}
}

// TestQuantizeHelp checks that --help documents the types and exit codes.
func TestQuantizeHelp(t *testing.T) {
	code, out, _ := quantizeCLI(t, context.Background(), "quantize", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"muser quantize [flags] IN OUT", "NVFP4, Q8_0, Q4_K", "general.file_type", "EXIT STATUS", "--force"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

// TestQuantizeOutputCreatedMeanwhile: an OUT that another process creates
// after quantize checked that OUT does not exist is not replaced: quantize
// fails as for an OUT that existed before (exit 1, the --force message),
// OUT keeps the other process's bytes and no temporary file is left.
func TestQuantizeOutputCreatedMeanwhile(t *testing.T) {
	in := quantizeStories(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.gguf")
	theirs := []byte("written by another process meanwhile")
	quantizeBeforeWrite = func() {
		if err := os.WriteFile(out, theirs, 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { quantizeBeforeWrite = func() {} })
	code, stdout, stderr := quantizeCLI(t, context.Background(), "quantize", "--type", "Q8_0", in, out)
	want := out + " exists; --force replaces it"
	if code != exitFailure || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, exitFailure, want)
	}
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, theirs) {
		t.Errorf("OUT created during the run holds %d bytes (%v) after it; want the other process's %q", len(got), err, theirs)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
		t.Errorf("OUT's directory holds %d entries (%v); want OUT alone, no temporary file", len(entries), err)
	}
}
