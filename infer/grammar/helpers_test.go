package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
)

var (
	tokOnce sync.Once
	tokVal  *tokenizer.Tokenizer
	tokErr  error
)

// vocab returns the embedded default model's tokenizer.
func vocab(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tokOnce.Do(func() {
		f, err := defaultmodel.File()
		if err != nil {
			tokErr = err
			return
		}
		tokVal, tokErr = tokenizer.FromGGUF(f.Meta)
	})
	if tokErr != nil {
		t.Fatal(tokErr)
	}
	return tokVal
}

// walk generates from g with tok by drawing allowed tokens at random,
// favouring JSON punctuation so that walks end, until an end-of-generation
// token is drawn or steps run out. It checks at every step that the
// allowed set is consistent with Accept on a sample of tokens. It returns
// the text and whether the walk ended.
func walk(t *testing.T, c *Compiled, tok *tokenizer.Tokenizer, seed uint64, steps int) (string, bool) {
	t.Helper()
	m := c.NewMatcher(tok)
	r := rand.New(rand.NewPCG(seed, 1))
	set := sample.NewTokenSet(tok.VocabSize())
	var out strings.Builder
	for step := 0; step < steps; step++ {
		set.Clear()
		if err := m.Allowed(set); err != nil {
			t.Fatalf("step %d: Allowed: %v", step, err)
		}
		if set.Len() == 0 {
			t.Fatalf("step %d after %q: no token allowed and the grammar cannot end", step, out.String())
		}
		// Consistency: allowed tokens are accepted, others refused.
		for range 8 {
			id := int32(r.IntN(tok.VocabSize()))
			err := m.Clone().Accept(id)
			if set.Has(id) != (err == nil) {
				p, _ := tok.Piece(id, false)
				t.Fatalf("step %d after %q: token %d (%q) in set %v, Accept gave %v", step, out.String(), id, p, set.Has(id), err)
			}
		}
		var cands []int32
		var weights []int
		total := 0
		for id := int32(0); int(id) < tok.VocabSize(); id++ {
			if !set.Has(id) {
				continue
			}
			w := 1
			p, _ := tok.Piece(id, false)
			switch {
			case tok.IsEOG(id):
				w = 100000
			case strings.ContainsAny(p, "\"{}[],:0123456789") || p == "true" || p == "null":
				w = 400
			}
			cands, weights = append(cands, id), append(weights, w)
			total += w
		}
		x := r.IntN(total)
		pick := cands[len(cands)-1]
		for i, w := range weights {
			if x < w {
				pick = cands[i]
				break
			}
			x -= w
		}
		if err := m.Accept(pick); err != nil {
			t.Fatalf("step %d: Accept(%d) of an allowed token: %v", step, pick, err)
		}
		if tok.IsEOG(pick) {
			return out.String(), true
		}
		p, _ := tok.Piece(pick, false)
		out.WriteString(p)
	}
	return out.String(), false
}

// validator compiles a JSON schema with a real JSON Schema library.
func validator(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(s *jsonschema.Schema, text string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

func isJSON(s string) bool { return json.Valid([]byte(s)) }
