package grammar

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
)

var schemaCases = []struct {
	name, schema string
	valid        []string // texts the grammar must accept
	invalid      []string // texts it must refuse
}{
	{"object", `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},"ok":{"type":"boolean"}},"required":["name","age"],"additionalProperties":false}`,
		[]string{`{"name":"Al","age":3}`, `{ "name" : "Al" , "age" : -3 , "ok" : true }`},
		[]string{`{"age":3}`, `{"name":"Al"}`, `{"name":"Al","age":3.5}`, `{"name":"Al","age":3,"x":1}`, `{"name":"0123456789abc","age":1}`}},
	{"enum and const", `{"type":"object","properties":{"color":{"enum":["red","green",7,null]},"v":{"const":{"a":[1,"x"]}}},"required":["color","v"]}`,
		[]string{`{"color":"red","v":{"a":[1,"x"]}}`, `{"color":7,"v":{"a":[1,"x"]}}`, `{"color":null,"v":{"a":[1,"x"]}}`},
		[]string{`{"color":"blue","v":{"a":[1,"x"]}}`, `{"color":"red","v":{"a":[1]}}`}},
	{"array bounds", `{"type":"array","items":{"type":"number"},"minItems":2,"maxItems":3}`,
		[]string{`[1,2]`, `[1.5, -2e3, 0]`},
		[]string{`[]`, `[1]`, `[1,2,3,4]`, `[1,"a"]`, `[01,2]`}},
	{"anyOf and null", `{"anyOf":[{"type":"string","minLength":2,"maxLength":3},{"type":"null"}]}`,
		[]string{`"ab"`, `"abc"`, `null`, `"\u00e9\n"`},
		[]string{`"a"`, `"abcd"`, `1`}},
	{"integer range", `{"type":"array","items":{"type":"integer","minimum":-15,"exclusiveMaximum":1234}}`,
		[]string{`[-15,-9,0,7,10,99,100,999,1000,1199,1233]`}, []string{`[-16]`, `[1234]`, `[2000]`, `[-0]`, `[01]`, `[-100]`}},
	{"safe integers (zod)", `{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`,
		[]string{`0`, `-999999999999999`, `123`}, []string{`1.5`, `9999999999999999`}},
	{"string length counts code points", `{"type":"object","properties":{"two":{"type":"string","minLength":2},"one":{"type":"string","maxLength":1}},"required":["two","one"]}`,
		[]string{`{"two":"ab","one":"\ud83d\ude00"}`, `{"two":"a\ud83d\ude00","one":"😀"}`, `{"two":"\u00e9\n","one":"\uffff"}`},
		[]string{`{"two":"\ud83d\ude00","one":""}`, `{"two":"ab","one":"\ud83d\ude00\ud83d\ude00"}`, `{"two":"ab","one":"\ud800"}`, `{"two":"ab","one":"\udc00"}`}},
	{"type list", `{"type":["integer","boolean"]}`, []string{`12`, `false`}, []string{`1.5`, `"x"`}},
	{"refs and recursion", `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
		[]string{`{"v":1,"next":null}`, `{"v":1,"next":{"v":2,"next":null}}`},
		[]string{`{"v":1}`, `{"v":1,"next":{"v":2}}`}},
	{"map", `{"type":"object","additionalProperties":{"type":"integer"}}`,
		[]string{`{}`, `{"a":1,"b":2}`}, []string{`{"a":"x"}`}},
	{"any", `{}`, []string{`1`, `{"a":[true,null]}`, `"s"`}, []string{`{`, `tru`}},
	{"optional order", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"required":["b"]}`,
		[]string{`{"b":1}`, `{"a":1,"b":2}`, `{"b":2,"c":3}`, `{"a":1,"b":2,"c":3}`},
		[]string{`{}`, `{"a":1}`, `{"b":1,"a":2}`, `{,"b":1}`, `{"b":1,}`}},
	{"format and escapes in names", `{"type":"object","properties":{"when \"x\"":{"type":"string","format":"date-time"}},"required":["when \"x\""]}`,
		[]string{`{"when \"x\"":"2026-01-01T00:00:00Z"}`}, []string{`{"when x":"a"}`}},
}

// checkLanguage compiles schema with opt and checks that the grammar
// accepts every text of valid (each of which must also validate against
// the schema) and refuses every text of invalid.
func checkLanguage(t *testing.T, schema string, opt SchemaOptions, valid, invalid []string) {
	t.Helper()
	g, err := FromSchema([]byte(schema), opt)
	if err != nil {
		t.Fatalf("FromSchema: %v", err)
	}
	v := validator(t, schema)
	for _, s := range valid {
		if ok, err := g.Match(s); err != nil || !ok {
			t.Errorf("Match(%s) = %v, %v; want true", s, ok, err)
		}
		if err := validate(v, s); err != nil {
			t.Errorf("the test's valid text %s does not validate: %v", s, err)
		}
	}
	for _, s := range invalid {
		if ok, err := g.Match(s); err != nil || ok {
			t.Errorf("Match(%s) = %v, %v; want false", s, ok, err)
		}
	}
}

func TestSchemaLanguage(t *testing.T) {
	for _, c := range schemaCases {
		t.Run(c.name, func(t *testing.T) {
			checkLanguage(t, c.schema, SchemaOptions{Strict: true}, c.valid, c.invalid)
		})
	}
}

// TestSchemaGeneration generates from every schema with the default
// model's vocabulary and validates each finished text with a JSON Schema
// library.
func TestSchemaGeneration(t *testing.T) {
	tok := vocab(t)
	for _, c := range schemaCases {
		t.Run(c.name, func(t *testing.T) {
			g, err := FromSchema([]byte(c.schema), SchemaOptions{Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			cg, err := Compile(g, tok)
			if err != nil {
				t.Fatal(err)
			}
			v := validator(t, c.schema)
			ended := 0
			const walks = 12
			for seed := range uint64(walks) {
				text, ok := walk(t, cg, tok, seed, 4000)
				if !ok {
					continue
				}
				ended++
				if !isJSON(text) {
					t.Errorf("seed %d: %q is not JSON", seed, text)
					continue
				}
				if err := validate(v, text); err != nil {
					t.Errorf("seed %d: %s does not validate: %v", seed, text, err)
				}
			}
			// Random walks favour punctuation, so most end; a recursive
			// schema's walks may nest deeper than the step limit.
			if ended == 0 {
				t.Errorf("none of %d walks ended", walks)
			}
			t.Logf("%d of %d walks ended", ended, walks)
		})
	}
}

func TestJSONObjectGeneration(t *testing.T) {
	tok := vocab(t)
	cg, err := Compile(JSONObject(), tok)
	if err != nil {
		t.Fatal(err)
	}
	ended := 0
	for seed := range uint64(12) {
		text, ok := walk(t, cg, tok, 100+seed, 600)
		if !ok {
			continue
		}
		ended++
		if !isJSON(text) || text[0] != '{' {
			t.Errorf("seed %d: %q is not a JSON object", seed, text)
		}
	}
	if ended < 6 {
		t.Errorf("%d of 12 walks ended, want at least 6", ended)
	}
}

func TestSchemaErrors(t *testing.T) {
	for _, c := range []struct {
		name, schema, ptr string
		strict            bool
	}{
		{"not JSON", `{"type":`, "", false},
		{"false", `false`, "", false},
		{"not a schema", `[1]`, "", false},
		{"bad type", `{"type":"float"}`, "/type", false},
		{"bad type list", `{"type":[1]}`, "/type/0", false},
		{"unresolved ref", `{"$ref":"#/$defs/x"}`, "/$ref", false},
		{"remote ref", `{"$ref":"http://x/y.json"}`, "/$ref", false},
		{"bad enum", `{"enum":[]}`, "/enum", false},
		{"bad maxLength", `{"type":"string","maxLength":-1}`, "/maxLength", false},
		{"max below min", `{"type":"array","minItems":3,"maxItems":1}`, "/maxItems", false},
		{"allOf of two", `{"allOf":[{},{}]}`, "/allOf", false},
		{"pattern when strict", `{"type":"string","pattern":"^a"}`, "/pattern", true},
		{"number minimum when strict", `{"type":"object","properties":{"n":{"type":"number","minimum":0}}}`, "/properties/n/minimum", true},
		{"empty integer range", `{"type":"integer","minimum":5,"maximum":4}`, "", false},
		{"required undeclared when strict", `{"type":"object","properties":{"a":{}},"required":["b"]}`, "/required/0", true},
		{"maxLength beside $ref when strict", `{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","maxLength":2}`, "/maxLength", true},
		{"maxLength beside anyOf when strict", `{"anyOf":[{"type":"string"},{"type":"null"}],"maxLength":2}`, "/maxLength", true},
		{"type beside anyOf when strict", `{"type":"integer","anyOf":[{"minimum":0},{"maximum":-10}]}`, "/type", true},
		{"minimum beside allOf when strict", `{"allOf":[{"type":"integer"}],"minimum":3}`, "/minimum", true},
		{"enum beside const when strict", `{"const":"a","enum":["b"]}`, "/enum", true},
		{"maxLength beside enum when strict", `{"type":"string","enum":["a","bb"],"maxLength":1}`, "/maxLength", true},
		{"enum value of another type when strict", `{"type":"string","enum":["a",1]}`, "/enum/1", true},
		{"const of another type when strict", `{"type":["integer","null"],"const":1.5}`, "/const", true},
		{"left-recursive refs", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := FromSchema([]byte(c.schema), SchemaOptions{Strict: c.strict})
			var se *SchemaError
			if !errors.As(err, &se) || !errors.Is(err, ErrSchema) {
				t.Fatalf("got %v, want a *SchemaError", err)
			}
			if se.Pointer != c.ptr {
				t.Errorf("got pointer %q, want %q (%v)", se.Pointer, c.ptr, err)
			}
		})
	}
	// Strict: keywords beside const and enum that hold for every value.
	for _, s := range []string{`{"type":"string","enum":["a","b"],"description":"x"}`, `{"type":["integer","null"],"enum":[1,2.0,null]}`,
		`{"type":"number","const":1.5,"title":"t"}`, `{"anyOf":[{"type":"string"}],"description":"x","$defs":{}}`} {
		if _, err := FromSchema([]byte(s), SchemaOptions{Strict: true}); err != nil {
			t.Errorf("FromSchema(%s) strict: %v", s, err)
		}
	}
	// Not strict: the unsupported keywords are ignored.
	for _, s := range []string{`{"type":"string","pattern":"^a"}`, `{"type":"integer","minimum":0}`} {
		if _, err := FromSchema([]byte(s), SchemaOptions{}); err != nil {
			t.Errorf("FromSchema(%s) without strict: %v", s, err)
		}
	}
}

// TestIntegerRanges checks the integer range grammar against every
// integer from -1100 to 1100 for a table of bounds.
func TestIntegerRanges(t *testing.T) {
	for _, c := range []struct{ lo, hi int }{{0, 0}, {0, 9}, {3, 47}, {10, 99}, {7, 1000}, {-1, 1}, {-1000, -7}, {-99, 250}, {101, 109}, {555, 556}} {
		t.Run(fmt.Sprintf("%d..%d", c.lo, c.hi), func(t *testing.T) {
			g, err := FromSchema([]byte(fmt.Sprintf(`{"type":"integer","minimum":%d,"maximum":%d}`, c.lo, c.hi)), SchemaOptions{Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			for n := -1100; n <= 1100; n++ {
				ok, err := g.Match(strconv.Itoa(n))
				if err != nil {
					t.Fatal(err)
				}
				if want := c.lo <= n && n <= c.hi; ok != want {
					t.Errorf("Match(%d) = %v, want %v", n, ok, want)
				}
			}
		})
	}
}

// TestSchemaLanguageNotStrict checks schemas compiled without
// SchemaOptions.Strict: what they accept must still validate.
func TestSchemaLanguageNotStrict(t *testing.T) {
	for _, c := range []struct {
		name, schema string
		valid        []string
		invalid      []string
	}{
		{"required undeclared takes additionalProperties", `{"type":"object","additionalProperties":{"type":"integer"},"required":["a"]}`,
			[]string{`{"a":1}`}, []string{`{"a":"x"}`, `{}`}},
		{"required undeclared beside properties", `{"type":"object","properties":{"b":{"type":"string"}},"additionalProperties":{"type":"integer"},"required":["a"]}`,
			[]string{`{"a":1}`, `{"b":"x","a":2}`}, []string{`{"b":"x","a":"y"}`, `{"b":"x"}`}},
		{"required undeclared, additionalProperties true", `{"type":"object","additionalProperties":true,"required":["a"]}`,
			[]string{`{"a":"x"}`, `{"a":[1]}`}, []string{`{}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkLanguage(t, c.schema, SchemaOptions{}, c.valid, c.invalid)
		})
	}
}
