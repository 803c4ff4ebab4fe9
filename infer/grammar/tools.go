package grammar

import (
	"fmt"
	"strings"
)

// Function is a tool the model may call: its name and the JSON schema of
// its parameters (nil or empty: any JSON object).
type Function struct {
	Name       string
	Parameters []byte
}

// ToolCallOptions configures the tool-call grammars.
type ToolCallOptions struct {
	// Parallel allows several calls in one answer (one or more);
	// otherwise exactly one call is generated.
	Parallel bool
	// Strict compiles the parameter schemas with SchemaOptions.Strict.
	Strict bool
}

// ToolCallHermes returns a grammar that forces a tool call in the
// Hermes/Qwen format, for one of fns:
//
//	<tool_call>
//	{"name": "get_weather", "arguments": {"city": "Paris"}}
//	</tool_call>
//
// With Parallel, further calls follow, each on its own line. The
// arguments are generated from the function's parameter schema. The
// <tool_call> tags are token references, so a vocabulary that has them as
// control tokens gets those tokens and any other gets the text.
func ToolCallHermes(fns []Function, opt ToolCallOptions) (*Grammar, error) {
	return toolGrammar(fns, opt, "arguments",
		`<"<tool_call>"> "\n" CALL "\n" <"</tool_call>">`, `"\n"`, "", "")
}

// ToolCallLlama3 returns a grammar that forces a tool call in the JSON
// format of Llama 3.1–3.3's custom tool calling, for one of fns:
//
//	{"name": "get_weather", "parameters": {"city": "Paris"}}
//
// With Parallel, further calls follow, separated by "; " as Llama 3.2's
// template shows them.
func ToolCallLlama3(fns []Function, opt ToolCallOptions) (*Grammar, error) {
	return toolGrammar(fns, opt, "parameters", "CALL", `";" " "`, "", "")
}

// ToolCallMistral returns a grammar that forces a tool call in Mistral's
// format, for one of fns:
//
//	[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]
//
// [TOOL_CALLS] is a token reference (a control token in Mistral's
// vocabularies, the text otherwise). With Parallel the array holds one or
// more calls; otherwise exactly one.
func ToolCallMistral(fns []Function, opt ToolCallOptions) (*Grammar, error) {
	return toolGrammar(fns, opt, "arguments", "CALL", `"," " "?`, `<"[TOOL_CALLS]"> "["`, `"]"`)
}

// toolGrammar builds root ::= open call (sep call)* close, where a call is
// wrap with CALL replaced by the JSON object of one of fns.
func toolGrammar(fns []Function, opt ToolCallOptions, argsKey, wrap, sep, open, close string) (*Grammar, error) {
	if len(fns) == 0 {
		return nil, &SchemaError{Pointer: "", Reason: "no functions to call"}
	}
	c := newSchemaCompiler(SchemaOptions{Strict: opt.Strict})
	calls := make([]string, len(fns))
	for i, f := range fns {
		if f.Name == "" {
			return nil, &SchemaError{Pointer: fmt.Sprintf("/%d/name", i), Reason: "is empty"}
		}
		args := "json-object"
		if len(f.Parameters) > 0 {
			doc, err := decodeOrdered(f.Parameters)
			if err != nil {
				return nil, &SchemaError{Pointer: fmt.Sprintf("/%d/parameters", i), Reason: "is not valid JSON: " + err.Error(), Err: err}
			}
			if args, err = c.schema(doc, doc, "", 0); err != nil {
				return nil, fmt.Errorf("function %q parameters: %w", f.Name, err)
			}
		}
		calls[i] = c.rule("call-"+f.Name, `"{" ws "\"name\"" ws ":" ws `+literal(jsonString(f.Name))+
			` ws "," ws `+literal(jsonString(argsKey))+` ws ":" ws `+args+` "}"`)
	}
	call := c.rule("call", strings.ReplaceAll(wrap, "CALL", "( "+strings.Join(calls, " | ")+" )"))
	root := "root ::= "
	if open != "" {
		root += open + " "
	}
	root += call
	if opt.Parallel {
		root += " ( " + sep + " " + call + " )*"
	}
	if close != "" {
		root += " " + close
	}
	return c.grammar(root)
}
