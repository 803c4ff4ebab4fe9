package serve

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/muserhq/muser/infer/grammar"
)

// This file forces a tool call when tool_choice is "required" or names a
// function: the reply is constrained (infer/grammar) to exactly one call,
// in the template's format, of one of the allowed functions, its arguments
// generated from the function's parameters schema.

// toolCallGrammar returns the grammar of one call of one of tools in
// format f. When every tool's parameters are flat (see argsGBNF) the call
// is generated compactly: no white space inside the JSON, every property,
// bounded strings and numbers, so that a small model cannot wander inside
// it; otherwise infer/grammar's tool-call grammar compiles the schemas.
func toolCallGrammar(f toolFormat, tools []toolDef) (*grammar.Grammar, error) {
	if src := compactCallGBNF(f, tools); src != "" {
		return grammar.Parse(src)
	}
	fns := make([]grammar.Function, len(tools))
	for i, t := range tools {
		fns[i] = grammar.Function{Name: t.Name, Parameters: t.Parameters}
		if t.noParams {
			fns[i].Parameters = nil // any JSON object
		}
	}
	opt := grammar.ToolCallOptions{}
	switch f {
	case toolFormatHermes:
		return grammar.ToolCallHermes(fns, opt)
	case toolFormatLlama3:
		return grammar.ToolCallLlama3(fns, opt)
	case toolFormatMistral:
		return grammar.ToolCallMistral(fns, opt)
	}
	return nil, fmt.Errorf("the tool-call format %v cannot be forced", f)
}

// toolConstraint returns the compiled grammar that forces a call for
// tool_choice "required" (any of the tools) or a named function, and nil
// otherwise. A parameters schema the grammar compiler refuses is a 400
// naming that tool's parameters (toolsParam "tools" on chat; the
// Responses API's flat tools are mapped by chatToolParam).
func (s *Server) toolConstraint(ts *toolSet) (*grammar.Compiled, *apiError) {
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
	g, err := toolCallGrammar(ts.format, tools)
	if err != nil {
		// Name the tool at fault.
		for i, d := range ts.defs {
			if _, e1 := toolCallGrammar(ts.format, []toolDef{d}); e1 != nil {
				p := fmt.Sprintf("tools[%d].function.parameters", i)
				return nil, badRequest("invalid_value", p, "%s: %v", p, e1)
			}
		}
		return nil, unsupported("tool_choice", "tool_choice cannot be forced: %v", err)
	}
	return s.compileGrammar(g, "tool_choice")
}

// toolArgsGBNF holds the rules compact arguments use: strings of at most
// 24 characters and numbers of at most 9 digits (and 6 decimals), so a
// small model cannot wander inside one for ever. (Every rule here is
// compiled, reached or not: keep only what argsGBNF refers to.)
const toolArgsGBNF = `
str   ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] ){0,24} "\""
num   ::= "-"? [0-9]{1,9} ( "." [0-9]{1,6} )?
`

// compactCallGBNF returns the compact grammar of one call of one of tools
// in format f, or "" when a tool's parameters are not flat or f has no
// format.
func compactCallGBNF(f toolFormat, tools []toolDef) string {
	var call string
	switch f {
	case toolFormatHermes:
		call = `<"<tool_call>"> "\n{\"name\": \"%s\", \"arguments\": " %s "}\n" <"</tool_call>">`
	case toolFormatLlama3:
		call = `"{\"name\": \"%s\", \"parameters\": " %s "}"`
	case toolFormatMistral:
		call = `<"[TOOL_CALLS]"> "[{\"name\": \"%s\", \"arguments\": " %s "}]"`
	default:
		return ""
	}
	alts := make([]string, len(tools))
	for i, t := range tools {
		args := `"{}"`
		if !t.noParams {
			if args = argsGBNF(t.Parameters); args == "" {
				return ""
			}
		}
		// Names hold [A-Za-z0-9_.-] only (checkToolName).
		alts[i] = fmt.Sprintf(call, t.Name, args)
	}
	return "root ::= " + strings.Join(alts, " | ") + "\n" + toolArgsGBNF
}

// argsGBNF returns the grammar of arguments that fit schema, when it is an
// object schema whose properties are all of type string, integer, number
// or boolean (or enums): every property, in name order, strings of at
// most 24 characters. Any other schema gives "" (not flat); an object
// schema without properties gives "{}".
func argsGBNF(schema json.RawMessage) string {
	var sc struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type string `json:"type"`
			Enum []any  `json:"enum"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &sc) != nil || sc.Type != "" && sc.Type != "object" {
		return ""
	}
	if len(sc.Properties) == 0 {
		if sc.Type == "object" {
			return `"{}"`
		}
		return ""
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
					return ""
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
			return ""
		}
		key, _ := json.Marshal(n)
		parts = append(parts, strconv.Quote(string(key)+": ")+" "+v)
	}
	return `"{" ` + strings.Join(parts, ` ", " `) + ` "}"`
}
