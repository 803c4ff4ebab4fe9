package defaultmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel/evalset"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

func TestSHA256(t *testing.T) {
	b := Bytes()
	if len(b) != Size {
		t.Fatalf("len(Bytes()) = %d, want %d", len(b), Size)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != SHA256 {
		t.Fatalf("sha256 = %s, want %s", got, SHA256)
	}
	if err := Verify(); err != nil {
		t.Fatal(err)
	}
	if Size > 8_000_000 {
		t.Fatalf("Size = %d, want at most 8,000,000 bytes", Size)
	}
}

func TestBytesReturnsACopy(t *testing.T) {
	a := Bytes()
	a[0] ^= 0xff
	if b := Bytes(); b[0] == a[0] {
		t.Fatal("changing one Bytes() result changed the next")
	}
	if err := Verify(); err != nil {
		t.Fatalf("Verify after a caller changed its copy: %v", err)
	}
}

func TestVerifyDetectsAnotherFile(t *testing.T) {
	saved := data
	t.Cleanup(func() { data = saved })
	data = saved[:len(saved)-1] + "x"
	if err := Verify(); !errors.Is(err, ErrDigest) {
		t.Fatalf("Verify() = %v, want ErrDigest", err)
	}
	if _, err := File(); !errors.Is(err, ErrDigest) {
		t.Fatalf("File() = %v, want ErrDigest", err)
	}
}

func TestMetadata(t *testing.T) {
	f, err := File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := &f.Meta
	strs := []struct{ key, want string }{
		{"general.architecture", "llama"},
		{"general.name", Name},
		{"tokenizer.ggml.model", "llama"},
	}
	for _, tc := range strs {
		if got, err := m.String(tc.key); err != nil || got != tc.want {
			t.Errorf("%s = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
	u32s := []struct {
		key  string
		want uint32
	}{
		{gguf.KeyFileType, 7},
		{"llama.vocab_size", 2048},
		{"llama.context_length", 512},
		{"llama.embedding_length", 256},
		{"llama.block_count", 8},
		{"llama.feed_forward_length", 768},
		{"llama.attention.head_count", 8},
		{"llama.attention.head_count_kv", 4},
		{"llama.rope.dimension_count", 32},
		{"tokenizer.ggml.bos_token_id", 1},
		{"tokenizer.ggml.eos_token_id", 4},
		{"tokenizer.ggml.unknown_token_id", 0},
	}
	for _, tc := range u32s {
		if got, err := m.Uint32(tc.key); err != nil || got != tc.want {
			t.Errorf("%s = %d, %v; want %d", tc.key, got, err, tc.want)
		}
	}
	bools := []struct {
		key  string
		want bool
	}{
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
		{"tokenizer.ggml.add_space_prefix", false},
	}
	for _, tc := range bools {
		if got, err := m.Bool(tc.key); err != nil || got != tc.want {
			t.Errorf("%s = %v, %v; want %v", tc.key, got, err, tc.want)
		}
	}

	tokens, err := m.Strings("tokenizer.ggml.tokens")
	if err != nil {
		t.Fatal(err)
	}
	types, err := m.Int32s("tokenizer.ggml.token_type")
	if err != nil {
		t.Fatal(err)
	}
	scores, err := m.Float32s("tokenizer.ggml.scores")
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2048 || len(types) != 2048 || len(scores) != 2048 {
		t.Fatalf("got %d tokens, %d types, %d scores; want 2048 each", len(tokens), len(types), len(scores))
	}
	const control, byteType = 3, 6
	for id, want := range []string{"<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"} {
		if tokens[id] != want {
			t.Errorf("token %d = %q, want %q", id, tokens[id], want)
		}
		if wantType := int32(control); id > 0 && types[id] != wantType {
			t.Errorf("token %d (%s) has type %d, want %d (control)", id, want, types[id], wantType)
		}
	}
	if tokens[5] != "<0x00>" || types[5] != byteType || tokens[260] != "<0xFF>" || types[260] != byteType {
		t.Errorf("byte-fallback tokens: 5 = %q type %d, 260 = %q type %d; want <0x00> and <0xFF>, type %d",
			tokens[5], types[5], tokens[260], types[260], byteType)
	}

	if _, ok := f.Tensor("output.weight"); ok {
		t.Error("output.weight present; the model's embeddings are tied")
	}
	params := int64(0)
	for _, ti := range f.Tensors {
		params += ti.Elements()
		want := ggml.TypeQ8_0
		if len(ti.Shape) == 1 {
			want = ggml.TypeF32
		}
		if ti.Type != want {
			t.Errorf("tensor %s is %s, want %s", ti.Name, ti.Type, want)
		}
	}
	if params != 6_820_096 {
		t.Errorf("parameters = %d, want 6820096", params)
	}
	if want := 1 + 8*9 + 1; len(f.Tensors) != want {
		t.Errorf("got %d tensors, want %d", len(f.Tensors), want)
	}
}

// TestRecordedLlamaCppAnswers ties the committed llama.cpp record of the
// Q8_0 file (recipe/results/llamacpp-q8_0.json, the golden reference for
// muser's engine) to the held-out set: same questions in the same order,
// every reply graded correct, prompts starting with BOS and ending with the
// generation prompt's tokens.
func TestRecordedLlamaCppAnswers(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("recipe", "results", "llamacpp-q8_0.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Model     string `json:"model"`
		Correct   int    `json:"correct"`
		Total     int    `json:"total"`
		Questions []struct {
			Prompt    string  `json:"prompt"`
			Reply     string  `json:"reply"`
			PromptIDs []int32 `json:"prompt_ids"`
			OutputIDs []int32 `json:"output_ids"`
		} `json:"questions"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	qs := evalset.Questions()
	if len(rec.Questions) != len(qs) || rec.Correct != len(qs) || rec.Total != len(qs) {
		t.Fatalf("record has %d questions, %d/%d correct; want %d, all correct", len(rec.Questions), rec.Correct, rec.Total, len(qs))
	}
	// "<|im_start|>assistant\n": im_start, the piece "assistant", newline byte.
	for i, r := range rec.Questions {
		q := qs[i]
		if r.Prompt != q.Prompt {
			t.Fatalf("question %d is %q, want %q", i, r.Prompt, q.Prompt)
		}
		if !q.Check(r.Reply) {
			t.Errorf("%q: recorded reply %q is graded wrong", q.Prompt, r.Reply)
		}
		n := len(r.PromptIDs)
		if n < 8 || r.PromptIDs[0] != 1 || r.PromptIDs[1] != 3 || r.PromptIDs[n-3] != 3 || r.PromptIDs[n-1] != 5+'\n' {
			t.Errorf("%q: prompt ids %v do not start with BOS <|im_start|> and end with <|im_start|> assistant \\n", q.Prompt, r.PromptIDs)
		}
		if len(r.OutputIDs) == 0 {
			t.Errorf("%q: no output ids", q.Prompt)
		}
	}
}
