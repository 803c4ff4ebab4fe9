package template

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"
)

// fuzzLimits are tighter than the defaults so that each fuzz input runs in
// milliseconds; they bound the same resources.
var fuzzLimits = limits{
	maxOutput:     1 << 20,
	maxIterations: 1 << 16,
	maxItems:      1 << 16,
	maxDepth:      32,
	maxWork:       1 << 24,
}

// fuzzContext is a conversation that exercises every Context field.
func fuzzContext() Context {
	return Context{
		Messages: []Message{
			{Role: "system", Content: "You are a helpful assistant."},
			{Role: "user", Content: "Hello! <think>x</think> é 😀"},
			{Role: "assistant", Content: "<think>\nr\n</think>\n\nHi.", ReasoningContent: "r"},
			{Role: "assistant", NullContent: true, ToolCalls: []ToolCall{{ID: "call12345", Name: "get_weather", Arguments: map[string]any{"city": "Paris", "n": 1.5}}}},
			{Role: "tool", Content: "18 degrees", ToolCallID: "call12345", Name: "get_weather"},
			{Role: "user", Parts: []Part{{Type: "text", Text: "part"}, {Type: "image"}}},
		},
		Tools:               []any{weatherTool},
		AddGenerationPrompt: true,
		BOSToken:            "<s>",
		EOSToken:            "</s>",
		Extra:               map[string]any{"enable_thinking": false, "n": 3, "list": []any{1, "a", nil, true}},
		Now:                 func() time.Time { return fixedNow },
	}
}

// requireTyped fails unless err is an *Error of one of the package's kinds:
// anything else would be an internal error leaking out.
func requireTyped(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error is %T, not *Error: %v", err, err)
	}
	for _, k := range []error{ErrSyntax, ErrUnsupported, ErrRender, ErrRaised, ErrLimit, ErrInput} {
		if errors.Is(err, k) {
			return
		}
	}
	t.Fatalf("error has no known kind: %v", err)
}

// FuzzParse parses arbitrary template text and renders it with a fixed
// context: it must never panic, must stay within the limits, must report
// only typed errors, and must render deterministically.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "{{ x }}", "{% for m in messages %}{{ m.role }}{% endfor %}",
		"{% set ns = namespace(a=1) %}{% for i in range(3) if i %}{% set ns.a = ns.a * i %}{% endfor %}{{ ns.a }}",
		"{{ messages[::-1]|map(attribute='role')|join(',') }}", "{{ tools|tojson(indent=2) }}",
		"{% macro m(a, b=2) %}{{ a ~ b }}{% endmacro %}{{ m(1) }}", "{%- if x -%}\n  a\n{%- endif -%}",
		"{# c #}{% raw %}{{{% endraw %}", "{{ 'a' if b else c|d }}", "{{ strftime_now('%d %b %Y') }}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tp, err := Parse(src)
		if err != nil {
			requireTyped(t, err)
			return
		}
		out1, err1 := tp.render(fuzzContext(), fuzzLimits)
		if err1 != nil {
			requireTyped(t, err1)
		}
		if len(out1) > fuzzLimits.maxOutput {
			t.Fatalf("output of %d bytes exceeds the limit", len(out1))
		}
		out2, err2 := tp.render(fuzzContext(), fuzzLimits)
		if out1 != out2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("two renders differ: %q (%v) vs %q (%v)", out1, err1, out2, err2)
		}
	})
}

// FuzzDecodeJSON feeds arbitrary bytes to the json.RawMessage decoder: it
// must not panic, and a decoded value must survive tojson and decoding
// again unchanged.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5, null, true, "x"]}`, `[]`, `{"b": 1, "a": 2, "b": 3}`, `"\u00e9\n"`, `1e400`, `-0`, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := decodeJSON(data)
		if err != nil {
			return
		}
		if hasNonFinite(v) {
			return // json.dumps writes Infinity, which JSON does not allow
		}
		s, err := toJSON(v, jsonOptions{itemSep: ", ", keySep: ": "})
		if err != nil {
			t.Fatalf("toJSON of a decoded value: %v", err)
		}
		w, err := decodeJSON([]byte(s))
		if err != nil {
			t.Fatalf("decoding toJSON output %q: %v", s, err)
		}
		if !pyEqual(v, w) {
			t.Fatalf("round trip changed the value: %q", s)
		}
		if _, err := json.Marshal(json.RawMessage(s)); err != nil {
			t.Fatalf("toJSON output %q is not valid JSON: %v", s, err)
		}
	})
}

func hasNonFinite(v any) bool {
	switch x := v.(type) {
	case float64:
		return math.IsInf(x, 0) || math.IsNaN(x)
	case *listValue:
		for _, it := range x.items {
			if hasNonFinite(it) {
				return true
			}
		}
	case *dictValue:
		for _, it := range x.vals {
			if hasNonFinite(it) {
				return true
			}
		}
	}
	return false
}
