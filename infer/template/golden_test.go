package template

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// The golden files under testdata/golden/<template>/<case>.txt are the
// expected renderings of the published templates in testdata/templates
// (provenance in testdata/README.md) for the conversations below. They
// were derived by hand: reading each template and working out, statement
// by statement, what it emits for each conversation; they were written
// before this renderer was run on them and never copied from another
// implementation's output. Where the renderer and a derivation disagreed,
// the cause was found in Jinja2's semantics before either was changed.
//
// -update rewrites the files from the current renderer. Use it only after a
// deliberate change, and review every line of the resulting diff by hand.
var update = flag.Bool("update", false, "rewrite golden files from the renderer (review the diff by hand)")

const (
	sysPrompt = "You are a helpful assistant."
	weatherQ  = "What is the weather in Paris?"
)

// weatherTool is passed as raw JSON so that its key order is kept.
var weatherTool = json.RawMessage(`{"type": "function", "function": {"name": "get_weather",
	"description": "Get the current weather in a city.",
	"parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
	"required": ["city"]}}}`)

func parisCall(args any) ToolCall {
	return ToolCall{ID: "call12345", Name: "get_weather", Arguments: args}
}

var parisArgs = map[string]any{"city": "Paris"}

// conversations are the test conversations, by case name.
var conversations map[string]func() Context

func init() {
	conversations = map[string]func() Context{
		"basic": func() Context {
			return Context{Messages: []Message{{Role: "system", Content: sysPrompt}, {Role: "user", Content: "Hello!"}}, AddGenerationPrompt: true}
		},
		"multi": func() Context {
			return Context{Messages: []Message{
				{Role: "system", Content: sysPrompt}, {Role: "user", Content: "Hello!"},
				{Role: "assistant", Content: "Hi! How can I help?"}, {Role: "user", Content: "What is 2+2?"},
			}, AddGenerationPrompt: true}
		},
		"nosys": func() Context {
			return Context{Messages: []Message{
				{Role: "user", Content: "Hello!"}, {Role: "assistant", Content: "Hi! How can I help?"}, {Role: "user", Content: "What is 2+2?"},
			}}
		},
		"tools": func() Context {
			return Context{Tools: []any{weatherTool}, Messages: []Message{{Role: "system", Content: sysPrompt}, {Role: "user", Content: weatherQ}}, AddGenerationPrompt: true}
		},
		"toolcall": func() Context {
			return Context{Tools: []any{weatherTool}, Messages: []Message{
				{Role: "user", Content: weatherQ},
				{Role: "assistant", ToolCalls: []ToolCall{parisCall(parisArgs)}},
				{Role: "tool", Content: "18 degrees and sunny", ToolCallID: "call12345"},
			}, AddGenerationPrompt: true}
		},
		// toolcall_null is the OpenAI form DeepSeek's templates expect:
		// content null and arguments a JSON string.
		"toolcall_null": func() Context {
			return Context{Messages: []Message{
				{Role: "user", Content: weatherQ},
				{Role: "assistant", NullContent: true, ToolCalls: []ToolCall{parisCall(`{"city": "Paris"}`)}},
				{Role: "tool", Content: "18 degrees and sunny", ToolCallID: "call12345"},
			}, AddGenerationPrompt: true}
		},
		"toolcall_strargs": func() Context {
			return Context{Messages: []Message{
				{Role: "user", Content: weatherQ},
				{Role: "assistant", ToolCalls: []ToolCall{parisCall(`{"city": "Paris"}`)}},
				{Role: "tool", Content: "18 degrees and sunny", ToolCallID: "call12345"},
			}, AddGenerationPrompt: true}
		},
		"parallel": func() Context {
			return Context{Tools: []any{weatherTool}, Messages: []Message{
				{Role: "user", Content: "What is the weather in Paris and Rome?"},
				{Role: "assistant", ToolCalls: []ToolCall{parisCall(parisArgs),
					{ID: "call67890", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Rome"}`)}}},
				{Role: "tool", Content: "18 degrees and sunny", ToolCallID: "call12345"},
				{Role: "tool", Content: "21 degrees and cloudy", ToolCallID: "call67890"},
			}, AddGenerationPrompt: true}
		},
		"nothink": func() Context {
			c := conversations["basic"]()
			c.Extra = map[string]any{"enable_thinking": false}
			return c
		},
		"think_inline": func() Context {
			return Context{Messages: []Message{{Role: "user", Content: "What is 2+2?"},
				{Role: "assistant", Content: "<think>\nSimple arithmetic.\n</think>\n\n2+2 = 4."}}}
		},
		"think_field": func() Context {
			return Context{Messages: []Message{{Role: "user", Content: "What is 2+2?"},
				{Role: "assistant", Content: "2+2 = 4.", ReasoningContent: "Simple arithmetic."}}}
		},
		"think_history": func() Context {
			return Context{Messages: []Message{
				{Role: "system", Content: sysPrompt}, {Role: "user", Content: "Hello!"},
				{Role: "assistant", Content: "<think>\nGreet back.\n</think>\n\nHi! How can I help?"}, {Role: "user", Content: "What is 2+2?"},
			}, AddGenerationPrompt: true}
		},
		"tools_in_system": func() Context {
			c := conversations["tools"]()
			c.Extra = map[string]any{"tools_in_user_message": false, "date_string": "01 Jan 2025"}
			return c
		},
		"builtin_tools": func() Context {
			c := conversations["basic"]()
			c.Extra = map[string]any{"builtin_tools": []string{"brave_search", "wolfram_alpha"}}
			return c
		},
		"padded": func() Context {
			return Context{Messages: []Message{{Role: "user", Content: "  Hello!\n"}}, AddGenerationPrompt: true}
		},
		"parts": func() Context {
			return Context{Messages: []Message{
				{Role: "system", Parts: []Part{{Type: "text", Text: sysPrompt}}},
				{Role: "user", Parts: []Part{{Type: "text", Text: "Hello!"}}},
			}, AddGenerationPrompt: true}
		},
		"empty_system": func() Context {
			return Context{Messages: []Message{{Role: "system", Content: ""}, {Role: "user", Content: "Hello!"}}, AddGenerationPrompt: true}
		},
	}
}

// specialTokens are each family's BOS and EOS text.
type specialTokens struct{ bos, eos string }

var (
	llamaTokens    = specialTokens{"<|begin_of_text|>", "<|eot_id|>"}
	imTokens       = specialTokens{"", "<|im_end|>"}
	mistralTokens  = specialTokens{"<s>", "</s>"}
	phiTokens      = specialTokens{"<s>", "<|endoftext|>"}
	gemmaTokens    = specialTokens{"<bos>", "<eos>"}
	deepseekTokens = specialTokens{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"}
)

// fixedNow is the time strftime_now sees in every golden render.
var fixedNow = time.Date(2025, time.March, 7, 14, 30, 0, 0, time.UTC)

var goldenTable = []struct {
	template string // testdata/templates/<template>.jinja; "chatml" is ChatMLSource
	tokens   specialTokens
	cases    []string
}{
	{"llama-3.1", llamaTokens, []string{"basic", "nosys", "tools", "toolcall", "tools_in_system", "builtin_tools"}},
	{"llama-3.2", llamaTokens, []string{"basic", "nosys", "tools", "toolcall"}},
	{"qwen2.5", imTokens, []string{"basic", "nosys", "tools", "toolcall", "parallel"}},
	{"qwen3", imTokens, []string{"basic", "multi", "nothink", "think_inline", "think_field", "think_history", "toolcall", "parallel"}},
	{"smollm2", imTokens, []string{"basic", "nosys"}},
	{"chatml", imTokens, []string{"basic", "nosys"}},
	{"mistral-legacy", mistralTokens, []string{"nosys"}},
	{"mistral-v0.3", mistralTokens, []string{"nosys", "multi", "tools", "toolcall"}},
	{"mistral-nemo", mistralTokens, []string{"multi", "toolcall"}},
	{"mistral-small", mistralTokens, []string{"basic", "multi"}},
	{"phi-3", phiTokens, []string{"basic", "nosys"}},
	{"phi-3.5", phiTokens, []string{"multi", "empty_system"}},
	{"gemma-2", gemmaTokens, []string{"nosys", "padded"}},
	{"gemma-3", gemmaTokens, []string{"basic", "multi", "parts"}},
	{"gemma-3-1b", gemmaTokens, []string{"parts"}},
	{"deepseek-v2", deepseekTokens, []string{"basic", "nosys"}},
	{"deepseek-v2.5", deepseekTokens, []string{"basic", "nosys"}},
	{"deepseek-v3", deepseekTokens, []string{"basic", "multi", "toolcall_null"}},
	{"deepseek-r1", deepseekTokens, []string{"basic", "think_history", "toolcall_strargs"}},
	{"deepseek-r1-distill", deepseekTokens, []string{"basic", "think_history"}},
}

// loadTemplate reads and parses testdata/templates/<name>.jinja.
func loadTemplate(t testing.TB, name string) *Template {
	t.Helper()
	if name == "chatml" {
		return ChatML()
	}
	b, err := os.ReadFile(filepath.Join("testdata", "templates", name+".jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := Parse(string(b))
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return tp
}

func renderCase(t *testing.T, tp *Template, tok specialTokens, caseName string) string {
	t.Helper()
	build, ok := conversations[caseName]
	if !ok {
		t.Fatalf("no conversation %q", caseName)
	}
	ctx := build()
	ctx.BOSToken, ctx.EOSToken = tok.bos, tok.eos
	ctx.Now = func() time.Time { return fixedNow }
	got, err := tp.Render(ctx)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return got
}

func TestGolden(t *testing.T) {
	want := map[string]bool{}
	for _, tc := range goldenTable {
		tp := loadTemplate(t, tc.template)
		for _, c := range tc.cases {
			path := filepath.Join("testdata", "golden", tc.template, c+".txt")
			want[filepath.ToSlash(path)] = true
			t.Run(tc.template+"/"+c, func(t *testing.T) {
				got := renderCase(t, tp, tc.tokens, c)
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("missing golden file: %v", err)
				}
				if got != string(b) {
					t.Errorf("render differs from %s\n got: %q\nwant: %q\n%s", path, got, string(b), firstDiff(got, string(b)))
				}
			})
		}
	}
	// Every golden file must belong to a case, so none goes stale.
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, f := range files {
		if !want[filepath.ToSlash(f)] {
			t.Errorf("golden file %s has no case in goldenTable", f)
		}
	}
}

// firstDiff describes where two strings first differ.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-20)
	return fmt.Sprintf("first difference at byte %d: got …%q want …%q", i, got[lo:min(len(got), i+20)], want[lo:min(len(want), i+20)])
}
