package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
)

// TestOllamaGenerateContext checks that /api/generate's context is the
// prompt and the generated tokens of the response the client was shown:
// a stop string cut from the response is not in it, so a client that
// sends the context back continues from what it saw. Greedy on
// stories260K, "Once upon a time" continues ", there was a little girl",
// whose last word is the tokens " g" "ir" "l".
func TestOllamaGenerateContext(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct {
		name     string
		stop     []string
		stream   bool
		response string // the text the client is shown
		context  string // the text of the context's generated tokens
	}{
		{"no stop", nil, false, ", there was a little girl", ", there was a little girl"},
		{"stop at a token boundary", []string{"ir"}, false, ", there was a little g", ", there was a little g"},
		{"stop inside a token", []string{"girl"}, false, ", there was a little ", ", there was a little"},
		{"stop inside a token, streamed", []string{"girl"}, true, ", there was a little ", ", there was a little"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"model": "stories260K", "prompt": "Once upon a time", "raw": true,
				"stream": tc.stream, "options": map[string]any{"num_predict": 8, "temperature": 0, "stop": tc.stop}})
			resp, raw := ts.post(t, "/api/generate", string(body))
			if resp.StatusCode != 200 {
				t.Fatalf("got %d %s", resp.StatusCode, raw)
			}
			var text strings.Builder
			var last struct {
				Response        string  `json:"response"`
				Context         []int32 `json:"context"`
				PromptEvalCount int     `json:"prompt_eval_count"`
				Done            bool    `json:"done"`
			}
			sc := bufio.NewScanner(bytes.NewReader(raw))
			for sc.Scan() {
				last.Response = ""
				if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
					t.Fatalf("%v in %s", err, sc.Text())
				}
				text.WriteString(last.Response)
			}
			if !last.Done {
				t.Fatalf("the last object is not done: %s", raw)
			}
			if text.String() != tc.response {
				t.Fatalf("response %q, want %q", text.String(), tc.response)
			}
			if len(last.Context) < last.PromptEvalCount {
				t.Fatalf("context holds %d tokens, fewer than the %d of the prompt", len(last.Context), last.PromptEvalCount)
			}
			got := piecesText(t, ts, last.Context[last.PromptEvalCount:])
			if got != tc.context {
				t.Errorf("the context's generated tokens read %q, want %q (the response is %q)", got, tc.context, tc.response)
			}
		})
	}
}

// piecesText is the text of ids as the scheduler streams it.
func piecesText(t *testing.T, ts *testServer, ids []int32) string {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		p, err := ts.s.model.tok.Piece(id, false)
		if err != nil {
			t.Fatal(fmt.Errorf("token %d: %w", id, err))
		}
		b.WriteString(p)
	}
	return b.String()
}

// TestOllamaShowCapabilities checks that /api/show's capabilities say
// what the server does with the model: "tools" exactly when /api/chat
// takes tools, which needs a chat template with a tool-call format muser
// knows (stories260K has no template and is served with ChatML, a Hermes
// format; a Gemma template has none). Clients read capabilities to decide
// whether to send tools.
func TestOllamaShowCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name, model string
		path        func(t *testing.T) string
		want        []string
	}{
		{"chatml", "stories260K", func(*testing.T) string { return modelPath }, []string{"completion", "tools"}},
		{"no tool format", "gemma", func(t *testing.T) string {
			return templateModel(t, "{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n{% endfor %}"+
				"{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
		}, []string{"completion"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			ts := startServer(t, func(o *Options) { o.ModelPath = path })
			var show struct {
				Capabilities []string `json:"capabilities"`
			}
			ts.postJSON(t, "/api/show", map[string]any{"model": tc.model}, &show)
			if !slices.Equal(show.Capabilities, tc.want) {
				t.Errorf("capabilities %q, want %q", show.Capabilities, tc.want)
			}
			resp, b := ts.post(t, "/api/chat", `{"model":"`+tc.model+`","stream":false,"messages":[{"role":"user","content":"hi"}],`+
				`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"options":{"num_predict":1}}`)
			if took := resp.StatusCode == http.StatusOK; took != slices.Contains(show.Capabilities, "tools") {
				t.Errorf("/api/chat with tools answered %d %s, but capabilities are %q", resp.StatusCode, b, show.Capabilities)
			}
		})
	}
}

// templateModel writes the tiny qwen2 test model, named by the file
// "gemma.gguf", with chat template tmpl.
func templateModel(t *testing.T, tmpl string) string {
	t.Helper()
	b, err := enginetest.Build(enginetest.Tiny("qwen2"), ggml.TypeQ8_0, 7)
	if err != nil {
		t.Fatal(err)
	}
	b.Set("tokenizer.chat_template", tmpl)
	p := filepath.Join(t.TempDir(), "gemma.gguf")
	if err := b.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOllamaShowNonFiniteFloats checks that /api/show answers valid JSON
// for a model whose metadata holds floats JSON cannot write (NaN, ±Inf),
// alone or in an array (verbose shows arrays): each is written as its
// text, as a lone float already was, rather than the answer being cut
// short after its 200 status.
func TestOllamaShowNonFiniteFloats(t *testing.T) {
	b, err := enginetest.Build(enginetest.Tiny("qwen2"), ggml.TypeQ8_0, 7)
	if err != nil {
		t.Fatal(err)
	}
	b.Set("test.scalar", float32(math.Inf(1)))
	b.Set("test.scores", []float32{0.5, float32(math.Inf(-1)), float32(math.NaN())})
	b.Set("test.wide", []float64{math.Inf(1)})
	path := filepath.Join(t.TempDir(), "odd.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(o *Options) { o.ModelPath = path })
	for _, tc := range []struct {
		verbose bool
		want    map[string]any
	}{
		{false, map[string]any{"test.scalar": "+Inf"}},
		{true, map[string]any{"test.scalar": "+Inf", "test.scores": []any{0.5, "-Inf", "NaN"}, "test.wide": []any{"+Inf"}}},
	} {
		t.Run(fmt.Sprintf("verbose=%v", tc.verbose), func(t *testing.T) {
			resp, body := ts.post(t, "/api/show", fmt.Sprintf(`{"model":"odd","verbose":%v}`, tc.verbose))
			var show struct {
				ModelInfo map[string]any `json:"model_info"`
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("got %d %s", resp.StatusCode, body)
			}
			if err := json.Unmarshal(body, &show); err != nil {
				t.Fatalf("the answer is not JSON (%v): %q", err, body)
			}
			for k, want := range tc.want {
				if got := show.ModelInfo[k]; fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("model_info[%q] is %v, want %v", k, got, want)
				}
			}
		})
	}
}
