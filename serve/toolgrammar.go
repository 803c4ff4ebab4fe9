package serve

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/muserhq/muser/infer/grammar"
	"github.com/muserhq/muser/infer/sample"
)

// This file forces a tool call when tool_choice is "required" or names a
// function: the reply is constrained (infer/grammar) to one call, in the
// template's format, of one of the allowed functions, with a JSON object
// as its arguments.

// toolArgsGBNF is the grammar of a call's arguments: a JSON object. Its
// sizes are bounded (at most 8 members or elements per object or array,
// strings of at most 24 characters, numbers of at most 9 digits) so a
// small model cannot wander inside one for ever.
const toolArgsGBNF = `
obj   ::= "{" ( pair ( ", " pair ){0,7} )? "}"
pair  ::= str ": " value
value ::= obj | arr | str | num | "true" | "false" | "null"
arr   ::= "[" ( value ( ", " value ){0,7} )? "]"
str   ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] ){0,24} "\""
num   ::= "-"? [0-9]{1,9} ( "." [0-9]{1,6} )?
`

// toolCallGBNF returns the grammar of one call of one of tools in format
// f, or "" when f has none. Each tool's arguments follow its parameters
// schema where argsGBNF can express it, else any JSON object.
func (s *Server) toolCallGBNF(f toolFormat, tools []toolDef) string {
	var call string
	switch f {
	case toolFormatHermes:
		call = `"<tool_call>\n{\"name\": \"%s\", \"arguments\": " %s "}\n</tool_call>"`
	case toolFormatLlama3:
		call = `"{\"name\": \"%s\", \"parameters\": " %s "}"`
	case toolFormatMistral:
		marker := ""
		if _, ok := s.model.tok.ID(mistralCalls); ok {
			marker = `<"[TOOL_CALLS]"> `
		}
		call = marker + `"[{\"name\": \"%s\", \"arguments\": " %s "}]"`
	default:
		return ""
	}
	alts := make([]string, len(tools))
	for i, t := range tools {
		// Names hold [A-Za-z0-9_.-] only (checkToolName).
		alts[i] = fmt.Sprintf(call, t.Name, argsGBNF(t.Parameters))
	}
	return "root ::= " + strings.Join(alts, " | ") + "\n" + toolArgsGBNF
}

// argsGBNF returns the grammar of arguments that fit schema, when it is an
// object schema whose properties are all of type string, integer, number
// or boolean (or enums of strings): every property, in name order. Any
// other schema gives "obj", any JSON object; no properties give "{}".
func argsGBNF(schema json.RawMessage) string {
	var sc struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type string `json:"type"`
			Enum []any  `json:"enum"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &sc) != nil || sc.Type != "" && sc.Type != "object" {
		return "obj"
	}
	if len(sc.Properties) == 0 {
		if strings.TrimSpace(string(schema)) == "{}" || sc.Type == "object" {
			return `"{}"`
		}
		return "obj"
	}
	names := make([]string, 0, len(sc.Properties))
	for n := range sc.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		p := sc.Properties[n]
		var v string
		switch {
		case len(p.Enum) > 0:
			var alts []string
			for _, e := range p.Enum {
				b, err := json.Marshal(e)
				if err != nil {
					return "obj"
				}
				alts = append(alts, strconv.Quote(string(b)))
			}
			v = "( " + strings.Join(alts, " | ") + " )"
		case p.Type == "string":
			v = "str"
		case p.Type == "integer":
			v = `"-"? [0-9]{1,9}`
		case p.Type == "number":
			v = "num"
		case p.Type == "boolean":
			v = `( "true" | "false" )`
		default:
			return "obj"
		}
		key, _ := json.Marshal(n)
		parts = append(parts, strconv.Quote(string(key)+": ")+" "+v)
	}
	return `"{" ` + strings.Join(parts, ` ", " `) + ` "}"`
}

// grammarCache keeps compiled grammars by their text: compiling walks the
// vocabulary, a request's matcher does not.
type grammarCache struct {
	mu sync.Mutex
	m  map[string]*grammar.Compiled
}

// maxCachedGrammars bounds the cache; past it, it starts again empty.
const maxCachedGrammars = 64

func (c *grammarCache) compile(src string, v grammar.Vocab) (*grammar.Compiled, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.m[src]; ok {
		return g, nil
	}
	g, err := grammar.Parse(src)
	if err != nil {
		return nil, err
	}
	cg, err := grammar.Compile(g, v)
	if err != nil {
		return nil, err
	}
	if c.m == nil || len(c.m) >= maxCachedGrammars {
		c.m = map[string]*grammar.Compiled{}
	}
	c.m[src] = cg
	return cg, nil
}

var toolGrammars grammarCache

// toolConstraint returns the constraint that forces a call for
// tool_choice "required" (any of the tools) or a named function, and nil
// otherwise.
func (s *Server) toolConstraint(ts *toolSet) (sample.Constraint, *apiError) {
	if ts == nil || (ts.choice.Mode != toolRequired && ts.choice.Mode != toolNamed) {
		return nil, nil
	}
	tools := ts.defs
	if ts.choice.Mode == toolNamed {
		for _, d := range ts.defs {
			if d.Name == ts.choice.Name {
				tools = []toolDef{d}
			}
		}
	}
	src := s.toolCallGBNF(ts.format, tools)
	if src == "" {
		return nil, unsupported("tool_choice", "the model's chat template defines no tool-call format muser can force")
	}
	cg, err := toolGrammars.compile(src, s.model.tok)
	if err != nil {
		return nil, &apiError{Status: 500, Type: typeServer, Code: "internal_error", Message: fmt.Sprintf("building the tool-call grammar: %v", err)}
	}
	return cg.NewMatcher(s.model.tok), nil
}
