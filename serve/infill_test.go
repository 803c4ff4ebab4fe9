package serve

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/template"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/serve/strictjson"
)

// fimModel writes the tiny qwen2 test model with FIM prefix, suffix and
// middle tokens (ids 300, 301, 302) and, when sep, a file separator (303).
func fimModel(t testing.TB, sep bool) string {
	t.Helper()
	b, err := enginetest.Build(enginetest.Tiny("qwen2"), ggml.TypeQ8_0, 7)
	if err != nil {
		t.Fatal(err)
	}
	b.Set(tokenizer.SpecialFIMPre.Key(), uint32(300))
	b.Set(tokenizer.SpecialFIMSuf.Key(), uint32(301))
	b.Set(tokenizer.SpecialFIMMid.Key(), uint32(302))
	if sep {
		b.Set(tokenizer.SpecialFIMSep.Key(), uint32(303))
	}
	p := filepath.Join(t.TempDir(), "fim.gguf")
	if err := b.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInfill(t *testing.T) {
	for _, sep := range []bool{false, true} {
		t.Run(map[bool]string{false: "no file separator", true: "file separator"}[sep], func(t *testing.T) {
			path := fimModel(t, sep)
			ts := startServer(t, func(o *Options) { o.ModelPath = path })
			tok := ts.s.model.tok
			enc := func(s string) []int32 {
				ids, err := tok.Encode(s, tokenizer.EncodeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return ids
			}
			// The layout, built by hand.
			var want []int32
			if sep {
				want = append(want, 303)
				want = append(want, enc("a.go\n")...)
			} else {
				want = append(want, enc("\n\n--- snippet ---\n\n")...)
			}
			want = append(want, enc("t1 t2")...)
			if sep {
				want = append(want, 303)
				want = append(want, enc("filename\n")...)
			}
			if tok.AddBOS() {
				want = append(want, tok.BOS())
			}
			want = append(want, 300)
			want = append(want, enc("t5 t6")...)
			want = append(want, enc(" t7")...)
			want = append(want, 301)
			want = append(want, enc("t8 t9")...)
			want = append(want, 302)

			q := &infillRequest{InputPrefix: ptr("t5 t6"), InputSuffix: ptr("t8 t9"),
				InputExtra: []infillChunk{{Filename: ptr("a.go"), Text: "t1 t2"}}}
			q.Prompt = json.RawMessage(`" t7"`)
			got, e := ts.s.infillPrompt(q, ts.s.fimTokens())
			if e != nil {
				t.Fatal(e)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("layout: got %v, want %v", got, want)
			}

			// The route answers what /completion answers for those tokens.
			body := map[string]any{"input_prefix": "t5 t6", "input_suffix": "t8 t9", "prompt": " t7", "temperature": 0,
				"n_predict": 6, "input_extra": []any{map[string]any{"filename": "a.go", "text": "t1 t2"}}, "return_tokens": true}
			var inf, cmp struct {
				Content         string  `json:"content"`
				Tokens          []int32 `json:"tokens"`
				TokensEvaluated int     `json:"tokens_evaluated"`
			}
			ts.postJSON(t, "/infill", body, &inf)
			ts.postJSON(t, "/completion", map[string]any{"prompt": want, "temperature": 0, "n_predict": 6, "return_tokens": true}, &cmp)
			if inf.TokensEvaluated != len(want) || !slices.Equal(inf.Tokens, cmp.Tokens) || inf.Content != cmp.Content || len(inf.Tokens) == 0 {
				t.Fatalf("/infill: %d tokens evaluated, generated %v %q; /completion of the layout: %v %q; want %d and the same",
					inf.TokensEvaluated, inf.Tokens, inf.Content, cmp.Tokens, cmp.Content, len(want))
			}
			for _, bad := range []struct{ body, param string }{
				{`{}`, "input_prefix"},
				{`{"input_prefix": "x", "prompt": [1, 2]}`, "prompt"},
				{`{"input_prefix": "x", "input_extra": [{"txt": "y"}]}`, "txt"},
				{`{"input_prefix": "x", "grammar": "root ::= x"}`, "grammar"},
				{`{"input_prefix": "` + strings.Repeat("t1 ", 600) + `"}`, "prompt"},
			} {
				resp, b := ts.post(t, "/infill", bad.body)
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), bad.param) {
					t.Errorf("%s: got %d %s, want 400 naming %q", bad.body[:min(len(bad.body), 60)], resp.StatusCode, b, bad.param)
				}
			}
		})
	}
}

func TestInfillWithoutFIMTokens(t *testing.T) {
	ts := startServer(t, nil) // stories260K has no FIM tokens
	resp, body := ts.post(t, "/infill", `{"input_prefix": "Once upon", "input_suffix": "the end."}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "fill-in-the-middle") {
		t.Fatalf("got %d %s, want 400 saying the model has no fill-in-the-middle tokens", resp.StatusCode, body)
	}
}

func TestApplyTemplate(t *testing.T) {
	ts := startServer(t, nil) // stories260K has no template: ChatML
	var r struct {
		Prompt string `json:"prompt"`
	}
	ts.postJSON(t, "/apply-template", map[string]any{"messages": []any{
		map[string]any{"role": "system", "content": "Be brief."},
		map[string]any{"role": "user", "content": "Hi"},
	}}, &r)
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if r.Prompt != want {
		t.Fatalf("got %q, want %q", r.Prompt, want)
	}
	// The same text the chat route renders.
	text, err := ts.s.model.tmpl.Render(template.Context{Messages: []template.Message{{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "Hi"}}, AddGenerationPrompt: true})
	if err != nil || text != want {
		t.Fatalf("chat template renders %q, %v; want %q", text, err, want)
	}
	for _, bad := range []struct{ body, param string }{
		{`{"messages": []}`, "messages"},
		{`{}`, "messages"},
		{`{"messages": [{"role": "robot", "content": "x"}]}`, `role \"robot\"`},
		{`{"messages": [{"role": "user", "content": "x"}], "stream": true}`, "stream"},
	} {
		resp, b := ts.post(t, "/apply-template", bad.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), bad.param) {
			t.Errorf("%s: got %d %s, want 400 naming %q", bad.body, resp.StatusCode, b, bad.param)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzInfill feeds bodies to /infill's decoding and prompt layout on a
// model with FIM tokens: nothing may panic, and an accepted body lays out
// a prompt within the vocabulary that ends with FIM_MID and holds FIM_PRE
// before FIM_SUF.
func FuzzInfill(f *testing.F) {
	for _, s := range []string{`{"input_prefix":"t1","input_suffix":"t2"}`, `{"prompt":"t3","input_extra":[{"filename":"a","text":"b"}]}`,
		`{"input_prefix":"","input_extra":[{}]}`, `{"prompt":[1,2]}`, `{}`} {
		f.Add(s)
	}
	path := fimModel(f, true)
	s, err := New(Options{ModelPath: path, Home: f.TempDir(), StoreNoSync: true, Ctx: 256, Threads: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	fim := s.fimTokens()
	vocab := s.model.tok.VocabSize()
	f.Fuzz(func(t *testing.T, body string) {
		var q infillRequest
		if strictjson.Decode([]byte(body), &q) != nil {
			return
		}
		ids, e := s.infillPrompt(&q, fim)
		if e != nil {
			if e.Status != 400 || e.Param == "" {
				t.Fatalf("refused with %d, param %q: %s", e.Status, e.Param, e.Message)
			}
			return
		}
		pre, suf := slices.Index(ids, fim.pre), slices.Index(ids, fim.suf)
		if len(ids) == 0 || ids[len(ids)-1] != fim.mid || pre < 0 || suf < pre {
			t.Fatalf("layout %v: want FIM_PRE, then FIM_SUF, and FIM_MID last", ids)
		}
		for _, id := range ids {
			if id < 0 || int(id) >= vocab {
				t.Fatalf("token %d outside the vocabulary", id)
			}
		}
	})
}

// TestApplyTemplateIsChatPrompt checks that /apply-template answers the
// text the chat route tokenizes, for a conversation with tool calls as
// for a plain one: its tokens (BOS added as the chat route adds it) are
// as many as the chat route's prompt_tokens.
func TestApplyTemplateIsChatPrompt(t *testing.T) {
	ts := startServer(t, nil) // ChatML, whose tool calls muser renders as Hermes <tool_call> blocks
	for _, tc := range []struct {
		name, messages string
		holds          string // a part the prompt must hold
	}{
		{"plain", `[{"role":"user","content":"weather?"}]`, "weather?"},
		{"tool calls", `[{"role":"user","content":"weather?"},
			{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"sunny"}]`, `"name": "get_weather"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := ts.post(t, "/apply-template", `{"messages":`+tc.messages+`}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/apply-template: got %d %s", resp.StatusCode, b)
			}
			var tmpl struct {
				Prompt string `json:"prompt"`
			}
			if err := json.Unmarshal(b, &tmpl); err != nil {
				t.Fatalf("%v in %s", err, b)
			}
			if !strings.Contains(tmpl.Prompt, tc.holds) {
				t.Errorf("/apply-template answered %q, which lacks %q", tmpl.Prompt, tc.holds)
			}
			var tok struct {
				Tokens []int32 `json:"tokens"`
			}
			ts.postJSON(t, "/tokenize", map[string]any{"content": tmpl.Prompt, "add_special": true}, &tok)
			var chat struct {
				Usage struct {
					PromptTokens int `json:"prompt_tokens"`
				} `json:"usage"`
			}
			resp, b = ts.post(t, "/v1/chat/completions", `{"messages":`+tc.messages+`,"max_tokens":1}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/v1/chat/completions: got %d %s", resp.StatusCode, b)
			}
			if err := json.Unmarshal(b, &chat); err != nil {
				t.Fatalf("%v in %s", err, b)
			}
			if len(tok.Tokens) != chat.Usage.PromptTokens {
				t.Errorf("/apply-template's prompt is %d tokens, the chat route's %d", len(tok.Tokens), chat.Usage.PromptTokens)
			}
		})
	}
}
