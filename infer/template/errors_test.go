package template

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// errCase is a template (or a published template with a conversation)
// that must fail with an *Error of a given kind, naming what is wrong.
type errCase struct {
	name      string
	src       string
	kind      error
	construct string // for ErrUnsupported: the exact Construct
	msg       string // a substring of the error text
	pos       Pos    // zero: not checked
}

var errCases = []errCase{
	// Unsupported constructs, named with their position.
	{"include", "{% include 'x' %}", ErrUnsupported, "tag 'include'", "cannot load other templates", Pos{1, 4}},
	{"extends", "{% extends 'x' %}", ErrUnsupported, "tag 'extends'", "inheritance", Pos{1, 4}},
	{"import", "{% import 'x' as y %}", ErrUnsupported, "tag 'import'", "", Pos{1, 4}},
	{"from_import", "{% from 'x' import y %}", ErrUnsupported, "tag 'from'", "", Pos{1, 4}},
	{"block", "{% block b %}{% endblock %}", ErrUnsupported, "tag 'block'", "", Pos{1, 4}},
	{"call_block", "{% call m() %}{% endcall %}", ErrUnsupported, "tag 'call'", "", Pos{1, 4}},
	{"caller", "{% macro m() %}{{ caller() }}{% endmacro %}", ErrUnsupported, "caller()", "", Pos{1, 19}},
	{"do", "{% do x %}", ErrUnsupported, "tag 'do'", "not enabled", Pos{1, 4}},
	{"autoescape", "{% autoescape true %}{% endautoescape %}", ErrUnsupported, "tag 'autoescape'", "", Pos{1, 4}},
	{"recursive_loop", "{% for x in y recursive %}{% endfor %}", ErrUnsupported, "recursive for loop", "", Pos{1, 15}},
	{"filter_groupby", "{{ x|groupby('a') }}", ErrUnsupported, "filter 'groupby'", "not supported", Pos{1, 6}},
	{"filter_unknown", "{{ x|nosuch }}", ErrUnsupported, "filter 'nosuch'", "no filter named 'nosuch'", Pos{1, 6}},
	{"filter_in_block", "{% filter wordwrap %}x{% endfilter %}", ErrUnsupported, "filter 'wordwrap'", "", Pos{1, 11}},
	{"test_escaped", "{{ x is escaped }}", ErrUnsupported, "test 'escaped'", "", Pos{1, 9}},
	{"test_unknown", "{{ x is prime }}", ErrUnsupported, "test 'prime'", "no test named 'prime'", Pos{1, 9}},
	{"star_args", "{{ f(*a) }}", ErrUnsupported, "argument unpacking", "", Pos{1, 6}},
	{"percent_format", "{{ '%s' % 1 }}", ErrUnsupported, "printf-style string formatting", "", Pos{1, 9}},
	{"str_encode", "{{ 'a'.encode() }}", ErrUnsupported, "method str.encode", "", Pos{1, 7}},
	{"global_cycler", "{{ cycler(1) }}", ErrUnsupported, "global function 'cycler'", "", Pos{1, 10}},
	{"named_escape", `{{ '\N{DASH}' }}`, ErrUnsupported, `\N{...} escape`, "", Pos{1, 4}},
	{"strftime_directive", "{{ strftime_now('%c') }}", ErrUnsupported, "strftime_now format", "%c", Pos{1, 16}},
	{"big_int_literal", "{{ 99999999999999999999 }}", ErrUnsupported, "integer literal", "64 bits", Pos{1, 4}},
	{"sameas_str", "{{ 'a' is sameas 'a' }}", ErrUnsupported, "test 'sameas'", "identity", Pos{1, 8}},
	{"map_unknown_filter", "{{ [1]|map('nosuch')|list }}", ErrUnsupported, "filter 'nosuch'", "", Pos{1, 8}},
	{"tojson_ascii", "{{ 'é'|tojson(ensure_ascii=true) }}", ErrUnsupported, "tojson(ensure_ascii=True)", "", Pos{1, 8}},
	{"print_generator", "{{ [1]|map('string') }}", ErrUnsupported, "printing a generator", "object address", Pos{1, 8}},
	{"position_line3", "line1\n{{ x }}\n  {% include 'a' %}", ErrUnsupported, "tag 'include'", "", Pos{3, 6}},

	// Syntax errors.
	{"unclosed_if", "{% if x %}a", ErrSyntax, "", "'if' tag opened here was never closed (looking for 'elif' or 'else' or 'endif')", Pos{1, 4}},
	{"unclosed_print", "{{ x", ErrSyntax, "", "unexpected end of template", Pos{}},
	{"stray_end", "{% endfor %}", ErrSyntax, "", "unknown tag 'endfor'", Pos{1, 4}},
	{"missing_operand", "{{ 1 + }}", ErrSyntax, "", "unexpected end of print statement", Pos{1, 8}},
	{"assign_literal", "{% set 1 = 2 %}", ErrSyntax, "", "can't assign", Pos{}},
	{"unclosed_comment", "a {# x", ErrSyntax, "", "missing end of comment tag", Pos{1, 3}},
	{"unterminated_string", "{{ 'abc }}", ErrSyntax, "", "unterminated string literal", Pos{1, 4}},
	{"bad_char", "{{ a ! b }}", ErrSyntax, "", "unexpected char '!'", Pos{1, 6}},
	{"default_order", "{% macro m(a=1, b) %}{% endmacro %}", ErrSyntax, "", "non-default argument follows default argument", Pos{}},
	{"unbalanced", "{{ (1 }}", ErrSyntax, "", "unexpected '}', expected ')'", Pos{}},
	{"empty_for_iter", "{% for x in %}{% endfor %}", ErrSyntax, "", "expected an expression", Pos{}},
	{"elif_after_else", "{% if x %}{% else %}{% elif y %}{% endif %}", ErrSyntax, "", "unknown tag 'elif'", Pos{}},
	{"break_outside_loop", "{% break %}", ErrSyntax, "", "'break' outside of a for loop", Pos{1, 4}},
	{"continue_in_macro_in_loop", "{% for i in x %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", ErrSyntax, "", "'continue' outside", Pos{}},
	{"invalid_utf8", "ab\n c\xff", ErrSyntax, "", "invalid UTF-8 at byte 5", Pos{2, 3}},
	{"chained_tests", "{{ x is defined is none }}", ErrSyntax, "", "", Pos{}},

	// Errors Jinja2 raises at run time.
	{"str_plus_int", "{{ 'a' + 1 }}", ErrRender, "", `can only concatenate str (not "int") to str`, Pos{1, 8}},
	{"plus_chain_error_order", "{{ 'a' + 'b' + 1 + missing.x }}", ErrRender, "", `can only concatenate str (not "int") to str`, Pos{1, 14}},
	{"div_zero", "{{ 1 / 0 }}", ErrRender, "", "division by zero", Pos{}},
	{"undefined_attr", "{{ missing.attr }}", ErrRender, "", "'missing' is undefined", Pos{}},
	{"undefined_nested", "{{ {}.x.y }}", ErrRender, "", "'dict object' has no attribute 'x'", Pos{}},
	{"undefined_plus", "{{ missing + 1 }}", ErrRender, "", "'missing' is undefined", Pos{}},
	{"undefined_call", "{{ missing() }}", ErrRender, "", "'missing' is undefined", Pos{}},
	{"sandbox_append", "{% set x = [] %}{{ x.append(1) }}", ErrRender, "", "unsafe", Pos{}},
	{"sandbox_dict_update", "{% set d = {} %}{{ d.update({'a': 1}) }}", ErrRender, "", "unsafe", Pos{}},
	{"order_mixed_types", "{{ 1 < 'a' }}", ErrRender, "", "not supported between instances of 'int' and 'str'", Pos{}},
	{"ns_assign_non_namespace", "{% set ns = 1 %}{% set ns.a = 1 %}", ErrRender, "", "cannot assign attribute on non-namespace object", Pos{}},
	{"unpack_non_iterable", "{% for a, b in [1] %}{% endfor %}", ErrRender, "", "cannot unpack non-iterable int object", Pos{}},
	{"unpack_too_many", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", ErrRender, "", "too many values to unpack", Pos{}},
	{"macro_too_many_args", "{% macro m() %}{% endmacro %}{{ m(1) }}", ErrRender, "", "takes not more than 0 argument(s)", Pos{}},
	{"macro_unknown_kwarg", "{% macro m() %}{% endmacro %}{{ m(a=1) }}", ErrRender, "", "takes no keyword argument 'a'", Pos{}},
	{"len_none", "{{ none|length }}", ErrRender, "", "object of type 'NoneType' has no len()", Pos{}},
	{"len_generator", "{{ [1]|select('odd')|length }}", ErrRender, "", "object of type 'generator' has no len()", Pos{}},
	{"in_none", "{{ 'x' in none }}", ErrRender, "", "argument of type 'NoneType' is not iterable", Pos{}},
	{"in_str_needs_str", "{{ 1 in 'abc' }}", ErrRender, "", "'in <string>' requires string as left operand, not int", Pos{}},
	{"unhashable", "{{ {[1]: 2} }}", ErrRender, "", "unhashable type: 'list'", Pos{}},
	{"iterate_int", "{% for x in 3 %}{% endfor %}", ErrRender, "", "'int' object is not iterable", Pos{}},
	{"call_non_callable", "{{ 'a'() }}", ErrRender, "", "'str' object is not callable", Pos{}},
	{"int_overflow", "{{ 9223372036854775807 + 1 }}", ErrUnsupported, "", "integer overflow", Pos{}},
	{"int_filter_overflow_string", `{{ "9223372036854775808"|int }}`, ErrUnsupported, "", "integer overflow in |int", Pos{}},
	{"int_filter_overflow_float", "{{ 1e20|int }}", ErrUnsupported, "", "integer overflow in |int", Pos{}},
	{"int_filter_inf", `{{ ("inf"|float)|int }}`, ErrRender, "", "cannot convert float infinity to integer", Pos{}},
	{"tojson_undefined", "{{ missing|tojson }}", ErrRender, "", "Object of type Undefined is not JSON serializable", Pos{}},

	// raise_exception.
	{"raise", "{{ raise_exception('boom') }}", ErrRaised, "", "boom", Pos{1, 19}},

	// Limits.
	// Limits (the table runs under testLimits).
	{"iterations", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", ErrLimit, "", "more than 65536 loop iterations", Pos{}},
	{"recursion", "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", ErrLimit, "", "macro calls nested deeper than 64", Pos{}},
	{"string_repeat", "{{ 'x' * 2000000 }}", ErrLimit, "", "string value exceeds 1048576 bytes", Pos{}},
	{"range_too_big", "{{ range(100001) }}", ErrLimit, "", "Range too big", Pos{}},
	{"list_repeat", "{{ [1] * 100000 }}", ErrLimit, "", "list exceeds 65536 items", Pos{}},
	{"deep_nesting", "{{ " + strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300) + " }}", ErrLimit, "", "nested deeper than 200", Pos{}},
	{"work_length_in_loop", "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{{ s|length }}{% endfor %}", ErrLimit, "", "built more than", Pos{}},
	{"work_compare_in_loop", "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{% if s == s %}{% endif %}{% endfor %}", ErrLimit, "", "built more than", Pos{}},
	{"work_quadratic_concat", "{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ 'x' * 1000 %}{% endfor %}", ErrLimit, "", "built more than", Pos{}},
	{"work_upper_in_loop", "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{% set t = s.upper() %}{% endfor %}", ErrLimit, "", "built more than", Pos{}},
	{"print_huge_list", "{{ ['x' * 100000] * 1000 }}", ErrLimit, "", "value printed exceeds", Pos{}},
	{"deep_blocks", strings.Repeat("{% if true %}", 300) + strings.Repeat("{% endif %}", 300), ErrLimit, "", "nested deeper than 200", Pos{}},
}

func checkErr(t *testing.T, err error, tc errCase) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", tc.kind)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %T (%v), want *Error", err, err)
	}
	if !errors.Is(err, tc.kind) {
		t.Errorf("got kind %v, want %v (error: %v)", e.Kind, tc.kind, err)
	}
	if tc.construct != "" && e.Construct != tc.construct {
		t.Errorf("got construct %q, want %q (error: %v)", e.Construct, tc.construct, err)
	}
	if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
		t.Errorf("error %q does not contain %q", err.Error(), tc.msg)
	}
	if tc.pos != (Pos{}) && e.Pos != tc.pos {
		t.Errorf("got position %v, want %v (error: %v)", e.Pos, tc.pos, err)
	}
	if tc.kind == ErrUnsupported && !strings.Contains(err.Error(), tc.construct) {
		t.Errorf("error %q does not name the construct %q", err.Error(), tc.construct)
	}
}

// testLimits are smaller than the defaults so that the limit cases run
// quickly; TestDefaultLimits checks the defaults themselves.
var testLimits = limits{maxOutput: 1 << 20, maxIterations: 1 << 16, maxItems: 1 << 16, maxDepth: 64, maxWork: 1 << 24}

func TestErrors(t *testing.T) {
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			var out string
			tp, err := Parse(tc.src)
			if err == nil {
				out, err = tp.render(Context{Now: func() time.Time { return fixedNow }}, testLimits)
			}
			if err == nil {
				t.Fatalf("rendered %q, want an error of kind %v", out, tc.kind)
			}
			checkErr(t, err, tc)
		})
	}
}

func TestDefaultLimits(t *testing.T) {
	for _, tc := range []errCase{
		{name: "iterations", src: "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", kind: ErrLimit, msg: "more than 2097152 loop iterations"},
		{name: "string", src: "{{ 'x' * 40000000 }}", kind: ErrLimit, msg: "string value exceeds 33554432 bytes"},
		{name: "items", src: "{{ [1, 2] * 1100000 }}", kind: ErrLimit, msg: "list exceeds 2097152 items"},
		{name: "work", src: "{% set s = 'x' * 30000000 %}{% for i in range(100) %}{% if s == s %}{% endif %}{% endfor %}", kind: ErrLimit, msg: "built more than 268435456 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderString(t, tc.src, nil)
			checkErr(t, err, tc)
		})
	}
}

func TestOutputLimit(t *testing.T) {
	tp, err := Parse("{% for i in range(1000) %}xxxxxxxxxx{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	lim := defaultLimits
	lim.maxOutput = 5000
	_, err = tp.render(Context{}, lim)
	checkErr(t, err, errCase{kind: ErrLimit, msg: "output exceeds 5000 bytes"})
	// The same template within the limit renders all of it.
	lim.maxOutput = 10000
	out, err := tp.render(Context{}, lim)
	if err != nil || len(out) != 10000 {
		t.Errorf("got %d bytes, %v; want 10000 bytes", len(out), err)
	}
}

// TestTemplateRefusals renders published templates with conversations they
// refuse, and checks the refusal is the template's own (raise_exception)
// or the error Jinja2 itself would raise.
func TestTemplateRefusals(t *testing.T) {
	cases := []struct {
		template string
		ctx      Context
		want     errCase
	}{
		{"mistral-legacy", conversations["basic"](), errCase{kind: ErrRaised, msg: "Conversation roles must alternate user/assistant/user/assistant/..."}},
		{"gemma-2", conversations["basic"](), errCase{kind: ErrRaised, msg: "System role not supported"}},
		{"mistral-v0.3", Context{Tools: []any{weatherTool}, Messages: []Message{
			{Role: "user", Content: weatherQ},
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "abc", Name: "get_weather", Arguments: parisArgs}}},
		}}, errCase{kind: ErrRaised, msg: "Tool call IDs should be alphanumeric strings with length 9!"}},
		{"llama-3.1", Context{Messages: []Message{
			{Role: "user", Content: weatherQ},
			{Role: "assistant", ToolCalls: []ToolCall{parisCall(parisArgs), parisCall(parisArgs)}},
		}}, errCase{kind: ErrRaised, msg: "This model only supports single tool-calls at once!"}},
		{"llama-3.1", Context{Tools: []any{weatherTool}, Messages: []Message{{Role: "system", Content: sysPrompt}}},
			errCase{kind: ErrRaised, msg: "Cannot put tools in the first user message when there's no first user message!"}},
		// The earlier Gemma 3 template indexes the system content as a
		// list of parts; with a string, Jinja2 fails the same way.
		{"gemma-3-1b", conversations["basic"](), errCase{kind: ErrRender, msg: "'str object' has no attribute 'text'"}},
		// DeepSeek-R1 tests '</think>' in content, which fails for None.
		{"deepseek-r1", conversations["toolcall_null"](), errCase{kind: ErrRender, msg: "argument of type 'NoneType' is not iterable"}},
	}
	for _, tc := range cases {
		t.Run(tc.template, func(t *testing.T) {
			_, err := loadTemplate(t, tc.template).Render(tc.ctx)
			checkErr(t, err, tc.want)
		})
	}
}

func TestInputErrors(t *testing.T) {
	tp := ChatML()
	cases := []struct {
		name string
		ctx  Context
		msg  string
	}{
		{"reserved_extra", Context{Extra: map[string]any{"messages": 1}}, `Extra key "messages" collides`},
		{"unsupported_go_type", Context{Extra: map[string]any{"c": make(chan int)}}, "chan int has no template counterpart"},
		{"bad_raw_json", Context{Tools: []any{json.RawMessage(`{"a":`)}}, "tool 0"},
		{"trailing_raw_json", Context{Tools: []any{json.RawMessage(`{} {}`)}}, "data after the JSON value"},
		{"bad_arguments", Context{Messages: []Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: struct{}{}}}}}}, "message 0"},
		{"uint_overflow", Context{Extra: map[string]any{"n": uint64(1 << 63)}}, "does not fit"},
		{"invalid_utf8_content", Context{Messages: []Message{{Role: "user", Content: "a\xffb"}}}, "Content is not valid UTF-8"},
		{"invalid_utf8_extra", Context{Extra: map[string]any{"s": "\xc3"}}, "not valid UTF-8"},
		{"deep_json", Context{Tools: []any{json.RawMessage(strings.Repeat("[", 150) + strings.Repeat("]", 150))}}, "nested deeper"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tp.Render(tc.ctx)
			checkErr(t, err, errCase{kind: ErrInput, msg: tc.msg})
		})
	}
}
