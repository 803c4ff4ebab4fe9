package grammar

import (
	"errors"
	"testing"
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
