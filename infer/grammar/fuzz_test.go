package grammar

import (
	"errors"
	"testing"

	"github.com/muserhq/muser/infer/sample"
)

// FuzzParse parses arbitrary grammars: no input may panic or hang, and a
// grammar that parses renders (String) to a grammar that parses and
// accepts the same strings.
func FuzzParse(f *testing.F) {
	f.Add(`root ::= "a" [b-d]* ("e" | f){1,3}`+"\nf ::= [^x]?", "abbe")
	f.Add(jsonRules+"root ::= json-value", `{"a":[1,2.5e3,"x\u00e9"]}`)
	f.Fuzz(func(t *testing.T, src, input string) {
		if len(src) > 4096 {
			return
		}
		g, err := Parse(src)
		if err != nil {
			return
		}
		g2, err := Parse(g.String())
		if err != nil {
			t.Fatalf("Parse(String()) failed: %v\nsource:\n%s\nrendered:\n%s", err, src, g.String())
		}
		a, errA := g.Match(input)
		b, errB := g2.Match(input)
		if errors.Is(errA, ErrTooLarge) || errors.Is(errB, ErrTooLarge) {
			return // the bound, not the language
		}
		if (errA == nil) != (errB == nil) || a != b {
			t.Fatalf("Match(%q): original %v (%v), reparsed %v (%v)", input, a, errA, b, errB)
		}
	})
}

// FuzzSchema compiles arbitrary JSON schemas: no input may panic, and a
// schema that compiles gives a grammar that parses back from its text.
func FuzzSchema(f *testing.F) {
	for _, c := range schemaCases {
		f.Add([]byte(c.schema), true)
	}
	f.Fuzz(func(t *testing.T, schema []byte, strict bool) {
		if len(schema) > 4096 {
			return
		}
		g, err := FromSchema(schema, SchemaOptions{Strict: strict})
		if err != nil {
			return
		}
		if _, err := Parse(g.String()); err != nil {
			t.Fatalf("Parse(String()) failed: %v\nschema: %s", err, schema)
		}
	})
}

// FuzzMatcherTokens drives a matcher of a JSON grammar with the default
// model's vocabulary through tokens chosen by the input, checking at each
// step that the allowed set and Accept agree on the chosen token, and
// following it only when it is allowed.
func FuzzMatcherTokens(f *testing.F) {
	f.Add(uint8(0), []byte{10, 200, 3, 77, 0, 0, 255})
	f.Add(uint8(3), []byte("[1, 2.5]"))
	tok := vocab(f)
	var compiled []*Compiled
	for _, c := range schemaCases {
		g, err := FromSchema([]byte(c.schema), SchemaOptions{})
		if err != nil {
			f.Fatal(err)
		}
		cg, err := Compile(g, tok)
		if err != nil {
			f.Fatal(err)
		}
		compiled = append(compiled, cg)
	}
	f.Fuzz(func(t *testing.T, which uint8, picks []byte) {
		m := compiled[int(which)%len(compiled)].NewMatcher(tok)
		set := sample.NewTokenSet(tok.VocabSize())
		for i := 0; i+1 < len(picks) && i < 64; i += 2 {
			set.Clear()
			if err := m.Allowed(set); err != nil {
				t.Fatal(err)
			}
			allowed := make([]int32, 0, 64)
			for id := int32(0); int(id) < tok.VocabSize(); id++ {
				if set.Has(id) {
					allowed = append(allowed, id)
				}
			}
			// The first byte picks any token; the second an allowed one.
			any := int32(picks[i]) * int32(tok.VocabSize()) / 256
			if err := m.Clone().Accept(any); (err == nil) != set.Has(any) {
				t.Fatalf("token %d: allowed %v, Accept %v", any, set.Has(any), err)
			}
			if len(allowed) == 0 {
				t.Fatal("nothing allowed")
			}
			next := allowed[int(picks[i+1])%len(allowed)]
			if err := m.Accept(next); err != nil {
				t.Fatalf("Accept(%d) of an allowed token: %v", next, err)
			}
			if tok.IsEOG(next) {
				return
			}
		}
	})
}
