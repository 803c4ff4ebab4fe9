package grammar

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
)

var weatherFns = []Function{
	{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string","maxLength":10},"days":{"type":"integer"}},"required":["city"],"additionalProperties":false}`)},
	{Name: "get_time", Parameters: []byte(`{"type":"object","properties":{"zone":{"enum":["UTC","CET"]}},"required":["zone"],"additionalProperties":false}`)},
	{Name: "ping"},
}

type call struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"`
}

func TestToolCalls(t *testing.T) {
	tok := vocab(t)
	for _, c := range []struct {
		name  string
		build func([]Function, ToolCallOptions) (*Grammar, error)
		parse func(string) ([]call, error)
		args  func(call) json.RawMessage
	}{
		{"hermes", ToolCallHermes, func(s string) ([]call, error) {
			var out []call
			for _, block := range strings.Split(s, "\n<tool_call>") {
				block = strings.TrimPrefix(block, "<tool_call>")
				inner, ok := strings.CutSuffix(strings.TrimPrefix(block, "\n"), "\n</tool_call>")
				if !ok {
					return nil, errors.New("no </tool_call> in " + block)
				}
				var x call
				if err := json.Unmarshal([]byte(inner), &x); err != nil {
					return nil, err
				}
				out = append(out, x)
			}
			return out, nil
		}, func(x call) json.RawMessage { return x.Arguments }},
		{"llama3", ToolCallLlama3, func(s string) ([]call, error) {
			var out []call
			for _, part := range strings.Split(s, "; ") {
				var x call
				if err := json.Unmarshal([]byte(part), &x); err != nil {
					return nil, err
				}
				out = append(out, x)
			}
			return out, nil
		}, func(x call) json.RawMessage { return x.Parameters }},
		{"mistral", ToolCallMistral, func(s string) ([]call, error) {
			rest, ok := strings.CutPrefix(s, "[TOOL_CALLS]")
			if !ok {
				return nil, errors.New("no [TOOL_CALLS] prefix")
			}
			var out []call
			err := json.Unmarshal([]byte(rest), &out)
			return out, err
		}, func(x call) json.RawMessage { return x.Arguments }},
	} {
		for _, parallel := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: "", true: " parallel"}[parallel], func(t *testing.T) {
				g, err := c.build(weatherFns, ToolCallOptions{Parallel: parallel, Strict: true})
				if err != nil {
					t.Fatal(err)
				}
				cg, err := Compile(g, tok)
				if err != nil {
					t.Fatal(err)
				}
				ended := 0
				for seed := range uint64(10) {
					text, ok := walk(t, cg, tok, seed, 800)
					if !ok {
						continue
					}
					ended++
					calls, err := c.parse(text)
					if err != nil {
						t.Errorf("seed %d: %q does not parse: %v", seed, text, err)
						continue
					}
					if !parallel && len(calls) != 1 {
						t.Errorf("seed %d: %d calls, want 1", seed, len(calls))
					}
					for _, x := range calls {
						var schema string
						for _, f := range weatherFns {
							if f.Name == x.Name {
								schema = string(f.Parameters)
							}
						}
						if schema == "" {
							if x.Name != "ping" {
								t.Errorf("seed %d: call of unknown function %q", seed, x.Name)
							}
							schema = `{"type":"object"}`
						}
						if err := validate(validator(t, schema), string(c.args(x))); err != nil {
							t.Errorf("seed %d: arguments %s of %s: %v", seed, c.args(x), x.Name, err)
						}
					}
				}
				if ended == 0 {
					t.Errorf("none of 10 walks ended")
				}
			})
		}
	}
	if _, err := ToolCallHermes(nil, ToolCallOptions{}); !errors.Is(err, ErrSchema) {
		t.Errorf("no functions: got %v, want ErrSchema", err)
	}
	if _, err := ToolCallHermes([]Function{{Name: "f", Parameters: []byte(`{"type":"string","pattern":"x"}`)}}, ToolCallOptions{Strict: true}); !errors.Is(err, ErrSchema) {
		t.Errorf("strict pattern: got %v, want ErrSchema", err)
	}
}

// TestTokenReference checks that a control token named in the grammar is
// the only token allowed where the grammar puts it, by text or by id.
func TestTokenReference(t *testing.T) {
	tok := vocab(t)
	start, ok := tok.ID("<|im_start|>")
	if !ok {
		t.Fatal("the default vocabulary has no <|im_start|>")
	}
	a, _ := tok.ID("a")
	for _, src := range []string{`root ::= "a" <|im_start|> "a"`, `root ::= "a" <[3]> "a"`, `root ::= "a" <"<|im_start|>"> "a"`} {
		t.Run(src, func(t *testing.T) {
			g, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Compile(g, tok)
			if err != nil {
				t.Fatal(err)
			}
			m := c.NewMatcher(tok)
			set := sample.NewTokenSet(tok.VocabSize())
			if err := m.Accept(a); err != nil {
				t.Fatal(err)
			}
			if err := m.Allowed(set); err != nil {
				t.Fatal(err)
			}
			if set.Len() != 1 || !set.Has(start) {
				t.Fatalf("after \"a\": %d tokens allowed (has %d: %v), want only %d", set.Len(), start, set.Has(start), start)
			}
			if err := m.Accept(start); err != nil {
				t.Fatal(err)
			}
			if m.CanEnd() {
				t.Errorf("CanEnd before the last \"a\"")
			}
			if err := m.Accept(a); err != nil {
				t.Fatal(err)
			}
			if !m.CanEnd() {
				t.Errorf("CanEnd = false after the whole sentence")
			}
			set.Clear()
			_ = m.Allowed(set)
			eogs := tok.EOGs()
			if set.Len() != len(eogs) {
				t.Errorf("at the end: %d tokens allowed, want only the %d end-of-generation tokens", set.Len(), len(eogs))
			}
			for _, id := range eogs {
				if !set.Has(id) {
					t.Errorf("at the end: end-of-generation token %d is not allowed", id)
				}
			}
		})
	}
	// Outside the vocabulary.
	g := MustParse(`root ::= <[99999]>`)
	if _, err := Compile(g, tok); !errors.Is(err, ErrInvalid) {
		t.Errorf("token 99999: got %v, want ErrInvalid", err)
	}
}

// TestMultibyteTokens checks byte-fallback tokens that split a character:
// "é" is two byte tokens in the default vocabulary, each allowed only
// where the character is.
func TestMultibyteTokens(t *testing.T) {
	tok := vocab(t)
	g := MustParse(`root ::= "é" | "x"`)
	c, err := Compile(g, tok)
	if err != nil {
		t.Fatal(err)
	}
	m := c.NewMatcher(tok)
	ids, err := tok.Encode("é", tokenizer.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := sample.NewTokenSet(tok.VocabSize())
	for i, id := range ids {
		set.Clear()
		if err := m.Allowed(set); err != nil {
			t.Fatal(err)
		}
		if !set.Has(id) {
			t.Fatalf("token %d of é (%d) is not allowed", i, id)
		}
		if err := m.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if !m.CanEnd() {
		t.Errorf("CanEnd = false after é")
	}
	// A byte that starts a different 2-byte character is refused.
	m = c.NewMatcher(tok)
	if id, ok := tok.ID("<0xC4>"); ok {
		if err := m.Accept(id); !errors.Is(err, ErrRejected) {
			t.Errorf("<0xC4> at the start: got %v, want ErrRejected", err)
		}
	}
}

// TestWorn checks that a compiled grammar reports when its states near
// their bounds, and that a matcher past them fails with ErrTooLarge.
func TestWorn(t *testing.T) {
	defer func(n, s int) { maxNodes, maxSets = n, s }(maxNodes, maxSets)
	maxNodes, maxSets = 64, 1<<16
	tok := vocab(t)
	c, err := Compile(JSONValue(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.Worn() {
		t.Fatal("a fresh compiled grammar is worn")
	}
	m := c.NewMatcher(tok)
	ids, err := tok.Encode("[", tokenizer.EncodeOptions{})
	if err != nil || len(ids) != 1 {
		t.Fatalf("encoding [: %v, %v", ids, err)
	}
	open := ids[0]
	var last error
	for i := 0; i < 200 && last == nil; i++ { // each nesting level is new stack frames
		last = m.Accept(open)
	}
	if !errors.Is(last, ErrTooLarge) {
		t.Errorf("nesting past the bound: got %v, want ErrTooLarge", last)
	}
	if !c.Worn() {
		t.Errorf("Worn = false after the bound was hit")
	}
}
