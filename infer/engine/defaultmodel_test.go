package engine_test

import (
	"context"
	"encoding/json"
	"github.com/muserhq/muser/infer/engine"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
)

// TestDefaultModelMatchesLlamaCpp replays llama.cpp's greedy answers on
// the embedded default model (a trained llama-architecture model at Q8_0;
// recorded with node-llama-cpp 3.21.1 in
// infer/defaultmodel/recipe/results/llamacpp-q8_0.json): from the same
// prompt token ids, muser's greedy tokens must be the same as llama.cpp's.
func TestDefaultModelMatchesLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "defaultmodel", "recipe", "results", "llamacpp-q8_0.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Questions []struct {
			Prompt    string  `json:"prompt"`
			PromptIDs []int32 `json:"prompt_ids"`
			OutputIDs []int32 `json:"output_ids"`
		} `json:"questions"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Questions) == 0 {
		t.Fatal("no recorded questions")
	}
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(f, cpuOptions(2))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, q := range rec.Questions {
		seq, err := m.NewSequence(len(q.PromptIDs) + len(q.OutputIDs) + 1)
		if err != nil {
			t.Fatal(err)
		}
		st := []engine.Step{{Seq: seq, Tokens: q.PromptIDs, Output: engine.OutputLast}}
		var got []int32
		for len(got) < len(q.OutputIDs) {
			if err := m.Forward(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			tok := argmaxTest(st[0].Logits)
			got = append(got, tok)
			st[0].Tokens = []int32{tok}
		}
		if !slices.Equal(got, q.OutputIDs) {
			t.Errorf("%q: greedy tokens\n%v\nllama.cpp\n%v", q.Prompt, got, q.OutputIDs)
		}
	}
}

func argmaxTest(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}
