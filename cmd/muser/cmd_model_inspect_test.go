package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func stories(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "models", "stories260K.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared test material %s not available: %v", p, err)
	}
	return p
}

func TestModelInspectText(t *testing.T) {
	path := stories(t)
	code, out, errOut := runCLI(t, "model", "inspect", path)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"parameters:  292800 in 48 tensors",
		`quant      "F32"`,
		"model      cdb8216aa7bc7f23693d99d5fb66dd71de5439af5d1a862d88f7a821d62a1ab6",
		`tokenizer.ggml.tokens`, `[512] ["<unk>", "<s>", "</s>", "<0x00>", ...]`,
		"llama.block_count", "blk.4.ffn_down.weight", "[172 64]",
		"identity     ", `arch       "llama;layers=5;`, `kv         "f16;block=64;layout=lkv1"`, `engine     "muser-cpu/2"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestModelInspectJSON(t *testing.T) {
	dir := t.TempDir()
	tmpl := "{% for m in messages %}" + strings.Repeat("x", 200) + "{% endfor %}"
	b := gguf.NewBuilder()
	b.SetString("general.architecture", "llama")
	b.SetUint32(gguf.KeyFileType, 7)
	b.SetString(gguf.KeyChatTemplate, tmpl)
	b.SetArray("tokenizer.ggml.tokens", []string{"a", "b", "c", "d", "e", "f"})
	b.SetArray("nan", []float32{1, float32(nan())})
	b.AddFloat32("w", ggml.TypeQ8_0, []int64{32, 2}, make([]float32, 64))
	b.AddFloat32("n", ggml.TypeF32, []int64{32}, make([]float32, 32))
	path := filepath.Join(dir, "m.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "model", "inspect", "--json", "--items", "2", path)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wd, td := gguf.WeightsDigest(f), gguf.TemplateDigest(tmpl)
	if rep.Parameters != 96 || len(rep.Tensors) != 2 {
		t.Errorf("parameters %d, tensors %d; want 96, 2", rep.Parameters, len(rep.Tensors))
	}
	if rep.Identity.Quant != "Q8_0" || rep.Identity.Model != hex.EncodeToString(wd[:]) || rep.Identity.Template != hex.EncodeToString(td[:]) {
		t.Errorf("identity %+v", rep.Identity)
	}
	if rep.FileType == nil || rep.FileType.Name != "MOSTLY_Q8_0" || rep.FileType.ID != 7 {
		t.Errorf("file type %+v", rep.FileType)
	}
	if tn := rep.Tensors[0]; tn.Name != "w" || tn.Type != "Q8_0" || tn.Bytes != 68 || tn.Offset%32 != 0 || len(tn.Shape) != 2 {
		t.Errorf("tensor 0: %+v", tn)
	}
	var tokens *inspectKV
	for i := range rep.Metadata {
		if rep.Metadata[i].Key == "tokenizer.ggml.tokens" {
			tokens = &rep.Metadata[i]
		}
	}
	if tokens == nil || tokens.Len == nil || *tokens.Len != 6 || len(tokens.Head) != 2 || tokens.Head[0] != "a" {
		t.Errorf("tokens entry %+v", tokens)
	}
	if !strings.Contains(out, `"NaN"`) {
		t.Error("NaN metadata value not written as a string")
	}

	code, out, _ = runCLI(t, "model", "inspect", path)
	if code != exitOK || !strings.Contains(out, "... (235 bytes)") || !strings.Contains(out, "MOSTLY_Q8_0 (7)") {
		t.Errorf("text output does not summarise the long template or show the file type:\n%s", out)
	}

	code, out, _ = runCLI(t, "model", "inspect", "--json", "--no-digest", path)
	rep = inspectReport{}
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil {
		t.Fatalf("--no-digest: exit %d, %v", code, err)
	}
	if rep.Identity.Model != "" || rep.Identity.Key != "" || len(rep.Identity.Missing) == 0 || rep.Identity.Missing[0].Field != "model" {
		t.Errorf("--no-digest: got model %q, key %q, missing %+v; want no model, no key, model listed first as missing",
			rep.Identity.Model, rep.Identity.Key, rep.Identity.Missing)
	}
}

func nan() float64 {
	var z float64
	return z / z
}

func TestModelInspectErrors(t *testing.T) {
	dir := t.TempDir()
	dup := []byte("GGUF\x03\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\x02\x00\x00\x00\x00\x00\x00\x00")
	for i := 0; i < 2; i++ {
		dup = append(dup, "\x01\x00\x00\x00\x00\x00\x00\x00k\x04\x00\x00\x00\x07\x00\x00\x00"...)
	}
	dupPath := filepath.Join(dir, "dup.gguf")
	if err := os.WriteFile(dupPath, dup, 0o644); err != nil {
		t.Fatal(err)
	}
	notGGUF := filepath.Join(dir, "text.gguf")
	os.WriteFile(notGGUF, []byte("hello, world"), 0o644)

	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"missing file", []string{"model", "inspect", filepath.Join(dir, "nope.gguf")}, exitNotFound, "nope.gguf"},
		{"duplicate key", []string{"model", "inspect", dupPath}, exitFailure, `kv[1] "k": duplicate`},
		{"not gguf", []string{"model", "inspect", notGGUF}, exitFailure, "magic"},
		{"no argument", []string{"model", "inspect"}, exitUsage, "exactly one FILE"},
		{"two arguments", []string{"model", "inspect", "a", "b"}, exitUsage, "exactly one FILE"},
		{"bad flag", []string{"model", "inspect", "--bogus", "x"}, exitUsage, "bogus"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errOut)
			}
			if !strings.Contains(errOut, tc.stderr) {
				t.Errorf("stderr %q lacks %q", errOut, tc.stderr)
			}
		})
	}
}

func TestModelInspectDefault(t *testing.T) {
	code, out, errOut := runCLI(t, "model", "inspect", "--default")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"default:     " + defaultmodel.Name + ", embedded in this binary",
		"sha256:      " + defaultmodel.SHA256 + " (verified)",
		"file type:   MOSTLY_Q8_0 (7)",
		`quant      "Q8_0"`,
		`general.architecture`, `"llama"`,
		"tokenizer.chat_template", "<|im_start|>",
		"blk.7.ffn_down.weight",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = runCLI(t, "model", "inspect", "--default", "--json", "--no-digest")
	if code != exitOK {
		t.Fatalf("--json: exit %d, stderr %q", code, errOut)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	if rep.Embedded == nil || rep.Embedded.Name != defaultmodel.Name || rep.Embedded.SHA256 != defaultmodel.SHA256 {
		t.Fatalf("embedded = %+v, want name %q and sha256 %s", rep.Embedded, defaultmodel.Name, defaultmodel.SHA256)
	}
	if rep.Size != defaultmodel.Size || rep.Parameters != 6_820_096 || rep.Identity.Quant != "Q8_0" {
		t.Fatalf("size %d, parameters %d, quant %q; want %d, 6820096, Q8_0", rep.Size, rep.Parameters, rep.Identity.Quant, defaultmodel.Size)
	}

	code, _, errOut = runCLI(t, "model", "inspect", "--default", "some.gguf")
	if code != exitUsage || !strings.Contains(errOut, "--default takes no FILE") {
		t.Fatalf("--default with a FILE: exit %d, stderr %q; want %d and a usage message", code, errOut, exitUsage)
	}
}
