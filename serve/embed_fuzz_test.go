package serve

import (
	"log/slog"
	"testing"

	"github.com/muserhq/muser/serve/strictjson"
)

// FuzzEmbedInputs feeds bodies to the embeddings routes' decoding and
// input parsing: nothing may panic, and a body is either refused with a
// 400 naming a field or yields non-empty inputs within the vocabulary.
func FuzzEmbedInputs(f *testing.F) {
	needModel(f)
	for _, s := range []string{`{"input":"hello"}`, `{"input":["a","b"]}`, `{"input":[1,2,3]}`, `{"input":[[1],[2,3]]}`,
		`{"input":[]}`, `{"input":[[]]}`, `{"input":["",1]}`, `{"content":"x","embd_normalize":-1}`, `{"input":null}`, `[`} {
		f.Add(s)
	}
	fuzzOnce.Do(func() {
		fuzzSrv, fuzzErr = New(Options{ModelPath: modelPath, Home: f.TempDir(), StoreNoSync: true, Ctx: 256, Threads: 1,
			Logger: slog.New(slog.DiscardHandler)})
	})
	if fuzzErr != nil {
		f.Fatal(fuzzErr)
	}
	s := fuzzSrv
	vocab := s.model.tok.VocabSize()
	f.Fuzz(func(t *testing.T, body string) {
		var q embeddingsRequest
		if strictjson.Decode([]byte(body), &q) != nil {
			return
		}
		inputs, e := s.parseEmbedInputs(q.Input, "input")
		if e != nil {
			if e.Status != 400 || e.Param == "" || e.Message == "" {
				t.Fatalf("refused with %d, param %q, %q; want 400 naming a field", e.Status, e.Param, e.Message)
			}
			return
		}
		if len(inputs) == 0 || len(inputs) > maxEmbedInputs {
			t.Fatalf("accepted %d inputs", len(inputs))
		}
		for i, in := range inputs {
			if len(in) == 0 {
				t.Fatalf("input %d is empty", i)
			}
			for _, id := range in {
				if id < 0 || int(id) >= vocab {
					t.Fatalf("input %d: token %d outside the vocabulary", i, id)
				}
			}
		}
	})
}
