package serve

import (
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/defaultmodel/evalset"
)

// TestDefaultModelAnswers serves the embedded default model, as `muser
// serve` without --model does, and asks it the held-out questions with
// temperature 0 through the OpenAI route: at least 8 in 10 must be
// answered correctly (the model issue's bar).
func TestDefaultModelAnswers(t *testing.T) {
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(o *Options) {
		o.ModelPath, o.Model, o.ModelName = "", f, defaultmodel.Name
		o.Parallel = 4
	})
	qs := evalset.Questions()
	right := 0
	for _, q := range qs {
		r := ts.chat(t, map[string]any{"model": defaultmodel.Name, "temperature": 0, "max_tokens": 48,
			"messages": []any{map[string]any{"role": "user", "content": q.Prompt}}})
		if q.Check(r.content) {
			right++
		} else {
			t.Logf("%s: %q answered %q, want %s %q", q.Kind, q.Prompt, r.content, q.Match, q.Want)
		}
	}
	t.Logf("%d of %d answered correctly", right, len(qs))
	if right*10 < len(qs)*8 {
		t.Errorf("got %d of %d right, want at least 80%%", right, len(qs))
	}
}
