package template

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/gguf"
)

// renderString parses and renders src with a few variables and a fixed
// clock.
func renderString(t *testing.T, src string, extra map[string]any) (string, error) {
	t.Helper()
	tp, err := Parse(src)
	if err != nil {
		return "", err
	}
	return tp.Render(Context{Extra: extra, Now: func() time.Time { return fixedNow }})
}

// Each expected output below follows from the definitions of Jinja2 (with
// transformers' settings) and CPython; the comments say which rule a case
// pins down.
var semanticCases = []struct {
	name, src, want string
}{
	// Lexer: whitespace control under trim_blocks and lstrip_blocks.
	{"trim_blocks", "a\n{% if true %}\nb\n{% endif %}\nc", "a\nb\nc"},
	{"lstrip_at_template_start", "  {% if true %}x{% endif %}", "x"},
	{"lstrip_only_at_line_start", "a  {% if true %}x{% endif %}", "a  x"},
	{"lstrip_not_after_print", "{{ 'a' }}  {% if true %}x{% endif %}", "a  x"},
	{"lstrip_after_newline", "a\n    {% if true %}x{% endif %}", "a\nx"},
	{"lstrip_after_trimmed_tag", "{% if true %}\n    {% if true %}x{% endif %}{% endif %}", "x"},
	{"no_trim_after_print", "{{ 'a' }}\nb", "a\nb"},
	{"minus_both_sides", "a {%- if true %} b {% endif -%} c", "a b c"},
	{"plus_disables_lstrip", "  {%+ if true %}x{% endif %}", "  x"},
	{"plus_disables_trim", "{% if true +%}\nx{% endif %}", "\nx"},
	{"print_minus", "{{ 'x' -}}\n  y", "xy"},
	{"print_minus_left", "x \n {{- 'y' }}", "xy"},
	{"comment_trimmed", "a\n{# c #}\nb", "a\nb"},
	{"comment_lstrip", "a\n   {# c #}\nb", "a\nb"},
	{"comment_minus", "a {#- c -#} b", "ab"},
	{"one_trailing_newline_dropped", "x\n", "x"},
	{"second_trailing_newline_kept", "x\n\n", "x\n"},
	{"crlf_normalised", "a\r\nb\rc", "a\nb\nc"},
	{"raw", "{% raw %}{{ x }}{% endraw %}", "{{ x }}"},
	{"braces_balanced_in_tag", "{{ {'a': 1}['a'] }}", "1"},
	{"string_holding_end_delimiter", "{{ '}}' }}", "}}"},

	// Literals and printing (CPython str/repr).
	{"int_arith", "{{ 1 + 2 * 3 }}", "7"},
	{"floor_div_negative", "{{ -7 // 2 }}", "-4"},
	{"mod_sign_of_divisor", "{{ 7 % -3 }}", "-2"},
	{"true_div", "{{ 7 / 2 }} {{ 4 / 2 }}", "3.5 2.0"},
	{"pow", "{{ 2 ** 10 }} {{ 2 ** -1 }}", "1024 0.5"},
	{"float_repr_small", "{{ 1e-5 }} {{ 0.0001 }}", "1e-05 0.0001"},
	{"float_repr_large", "{{ 1e16 }} {{ 123456789012345.0 }}", "1e+16 123456789012345.0"},
	{"float_repr_shortest", "{{ 0.1 + 0.2 }}", "0.30000000000000004"},
	{"float_inf", "{{ 1e308 * 10 }}", "inf"},
	{"int_literals", "{{ 0x1F }} {{ 0b101 }} {{ 0o17 }} {{ 1_000 }}", "31 5 15 1000"},
	{"concat_str", "{{ 'a' ~ 1 ~ none ~ true ~ 1.5 }}", "a1NoneTrue1.5"},
	{"list_repr", "{{ [1, 'a', none, true, 1.5] }}", "[1, 'a', None, True, 1.5]"},
	{"dict_repr", "{{ {'a': 1, 'b': [2]} }}", "{'a': 1, 'b': [2]}"},
	{"tuple_repr", "{{ (1,) }} {{ (1, 2) }} {{ () }}", "(1,) (1, 2) ()"},
	{"str_repr_quotes", `{{ ["it's", 'a"b', "a'b\"c"] }}`, `["it's", 'a"b', 'a\'b"c']`},
	{"str_repr_escapes", `{{ ['a\nb\t\x01'] }}`, `['a\nb\t\x01']`},
	{"adjacent_strings", `{{ "a" 'b' }}`, "ab"},
	{"string_escapes", `{{ '\x41\u00e9\U0001F600|\d|\'' }}`, "Aé😀|\\d|'"},
	{"none_prints_None", "{{ none }}", "None"},

	// Indexing and slicing count code points.
	{"str_index", "{{ 'abc'[1] }}{{ 'abc'[-1] }}{{ 'héllo'[1] }}", "bcé"},
	{"str_slice", "{{ 'abcdef'[1:4] }}|{{ 'abcdef'[::-1] }}|{{ 'abcdef'[::2] }}|{{ 'héllo'[1:3] }}", "bcd|fedcba|ace|él"},
	{"list_slice", "{{ [1,2,3][-2:] }} {{ [1,2,3][:-1] }} {{ [1,2,3][5:] }}", "[2, 3] [1, 2] []"},
	{"length_code_points", "{{ 'héllo'|length }}", "5"},
	{"index_out_of_range_undefined", "[{{ [1][5] }}]", "[]"},

	// Operators on sequences.
	{"list_plus", "{{ [1,2] + [3] }}", "[1, 2, 3]"},
	{"plus_chain", "{{ 'a' + 'b' + 'c' }} {{ 1 + 2 + 3.5 }} {{ [1] + [2] + [3] }} {{ ('<'|safe) + '<' + '>' }} {{ 'x' + ('<'|safe) + '<' }}", "abc 6.5 [1, 2, 3] <&lt;&gt; x<&lt;"},
	{"str_repeat", "{{ 'ab' * 3 }}{{ 2 * 'c' }}", "abababcc"},

	// Comparisons, membership, truthiness, precedence.
	{"numeric_equality", "{{ 1 == 1.0 }} {{ 1 == true }} {{ 0 == false }}", "True True True"},
	{"chained_compare", "{{ 'a' < 'b' < 'c' }} {{ 1 < 3 < 2 }}", "True False"},
	{"list_vs_tuple", "{{ [1,2] == [1,2] }} {{ (1,2) == [1,2] }}", "True False"},
	{"membership", "{{ 'a' in 'cat' }} {{ 'x' not in ['a'] }} {{ 'k' in {'k': 1} }}", "True True True"},
	{"and_or_values", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ none or [] }}", "x b []"},
	{"cond_expr", "{{ 'y' if false else 'n' }}[{{ 'y' if false }}]", "n[]"},
	{"not_binds_loosely", "{{ not 1 == 2 }}", "True"},
	{"unary_minus_then_filter", "{{ -3|abs }}", "3"},
	{"filter_binds_tightly", "{{ 'a' + 'b'|upper }}", "aB"},
	{"tests", "{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ true is number }} {{ true is integer }} {{ {} is mapping }}", "False True True True False True"},
	{"iterable_tests", "{{ 'a' is iterable }} {{ 1 is iterable }} {{ x is iterable }} {{ x is not defined }}", "True False True True"},
	{"arg_tests", "{{ 3 is odd }} {{ 4 is divisibleby 2 }} {{ 'a' is in 'abc' }} {{ 2 is equalto 2 }} {{ 3 is gt(2) }}", "True True True True True"},

	// Undefined: prints empty, iterates empty, missing keys are undefined.
	{"undefined_prints_empty", "[{{ missing }}]", "[]"},
	{"missing_key_undefined", "[{{ {}.x }}{{ {}['x'] }}{{ none.x }}]", "[]"},
	{"undefined_iterates_empty", "{% for x in missing %}a{% endfor %}.", "."},
	{"undefined_length_zero", "{{ missing|length }}", "0"},
	{"undefined_default", "{{ missing|default('d') }} {{ ''|default('d') }}|{{ ''|default('d', true) }}", "d |d"},
	{"dict_method_before_key", "{{ {'items': 1}['items'] }} {{ {'a': 1}.items() }}", "1 dict_items([('a', 1)])"},
	{"dict_views", "{{ {'a': 1}.keys() }} {{ {'a': 1}.values() }} {{ {'a': 1}.keys()|list }}", "dict_keys(['a']) dict_values([1]) ['a']"},

	// Scoping.
	{"loop_scope", "{% set x = 1 %}{% for i in [1,2] %}{% set x = i %}{% endfor %}{{ x }}", "1"},
	{"namespace_crosses_loop", "{% set ns = namespace(x=1) %}{% for i in [1,2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}", "4"},
	{"if_has_no_scope", "{% if true %}{% set x = 2 %}{% endif %}{{ x }}", "2"},
	{"namespace_repr", "{{ namespace(a=1) }}", "<Namespace {'a': 1}>"},
	{"with_scope", "{% with a = 1 %}{{ a }}{% endwith %}[{{ a }}]", "1[]"},

	// Loops.
	{"loop_vars", "{% for i in 'ab' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{% endfor %}", "10TrueFalse2221FalseTrue21"},
	{"prev_next", "{% for i in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}", "-2,1-3,2-,"},
	{"loop_filter", "{% for i in range(6) if i is even %}{{ i }}{{ loop.last }}{% endfor %}", "0False2False4True"},
	{"for_else", "{% for i in [] %}x{% else %}empty{% endfor %}", "empty"},
	{"break_continue", "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}", "02"},
	{"unpack_items", "{% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;"},
	{"dict_iteration_order", "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}", "ba"},
	{"reverse_slice_loop", "{% for m in [1,2,3][::-1] %}{{ m }}{% endfor %}", "321"},
	{"loop_cycle", "{% for i in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}", "aba"},

	// Macros and blocks.
	{"macro_defaults", "{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, b=2) }}{{ m(a=3) }}", "[1B][12][3B]"},
	{"macro_sees_globals", "{% set g = 'G' %}{% macro m() %}{{ g }}{% endmacro %}{{ m() }}", "G"},
	{"macro_varargs", "{% macro m() %}{{ varargs|length }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}", "2{'k': 3}"},
	{"set_block", "{% set x %}a{{ 1 }}b{% endset %}{{ x }}", "a1b"},
	{"set_block_filter", "{% set x | upper %}ab{% endset %}{{ x }}", "AB"},
	{"filter_block", "{% filter upper %}ab{% endfilter %}", "AB"},
	{"generation_block", "{% generation %}x{% endgeneration %}", "x"},
	{"print_tag", "{% print 'x' %}", "x"},
	{"tuple_set", "{% set a, b = 1, 2 %}{{ b }}{{ a }}", "21"},

	// Filters.
	{"trim", "{{ '  a  '|trim }}|{{ 'xxaxx'|trim('x') }}", "a|a"},
	{"title_filter_vs_method", `{{ "they're bill's"|title }}|{{ "they're".title() }}`, "They're Bill's|They'Re"},
	{"capitalize", "{{ 'hELLO'|capitalize }}", "Hello"},
	{"sort", "{{ [3,1,2]|sort }} {{ ['b','A','c']|sort }} {{ [3,1,2]|sort(reverse=true) }}", "[1, 2, 3] ['A', 'b', 'c'] [3, 2, 1]"},
	{"sort_attribute", "{{ [{'n': 2}, {'n': 1}]|sort(attribute='n')|map(attribute='n')|join }}", "12"},
	{"join", "{{ [1,2,3]|join(', ') }}|{{ [{'n':'a'},{'n':'b'}]|join(',', attribute='n') }}", "1, 2, 3|a,b"},
	{"aggregates", "{{ [1,2,3]|first }}{{ [1,2,3]|last }}{{ [1,2,3]|length }}{{ [1,2,3]|sum }}{{ [1,2,3]|max }}{{ [1,2,3]|min }}", "133631"},
	{"unique_case_insensitive", "{{ ['a','A','b']|unique|list }}", "['a', 'b']"},
	{"select_reject", "{{ [1,2,3,4]|select('odd')|list }} {{ [1,2,3,4]|reject('odd')|list }}", "[1, 3] [2, 4]"},
	{"selectattr", "{{ [{'r':'u'},{'r':'a'}]|selectattr('r', 'equalto', 'u')|list|length }}", "1"},
	{"rejectattr_in", "{{ ['type', 'x', 'enum']|reject('in', ['type', 'enum'])|list }}", "['x']"},
	{"map", "{{ [{'r':'u'},{'r':'a'}]|map(attribute='r')|join }} {{ ['a','b']|map('upper')|list }}", "ua ['A', 'B']"},
	{"generator_truthy", "{{ 'yes' if [1]|select('even') else 'no' }}", "yes"},
	{"dictsort", "{{ {'b': 1, 'a': 2}|dictsort }}", "[('a', 2), ('b', 1)]"},
	{"escape_and_markup_plus", "{{ 'a<b'|e }} {{ ('<'|safe) + '<' }} {{ ('<'|safe) ~ '<' }}", "a&lt;b <&lt; <<"},
	{"replace_reverse", "{{ 'abc'|replace('b', 'x') }} {{ 'abc'|reverse }} {{ [1,2]|reverse|list }}", "axc cba [2, 1]"},
	// |int is int(s, base), then int(float(s)); |float is float(s):
	// prefixes that match the base, single underscores between digits,
	// Unicode decimal digits, inf and nan, overflow to inf.
	{"int_base_prefix", `{{ "0x1F"|int(-1, 16) }} {{ "-0X1f"|int(-1, 16) }} {{ "0o17"|int(-1, 8) }} {{ "0b101"|int(-1, 2) }} {{ "0x_1f"|int(-1, 16) }} {{ "0b1"|int(-1, 16) }}`, "31 -31 15 5 31 177"},
	{"int_base_zero", `{{ "0x1F"|int(-1, 0) }} {{ "010"|int(-1, 0) }} {{ "00"|int(-1, 0) }} {{ "12"|int(-1, 1) }}`, "31 10 0 12"},
	{"int_underscores", `{{ "1_000"|int(-1) }} {{ "_1"|int(-1) }} {{ "1__0"|int(-1) }} {{ "1_"|int(-1) }} {{ "0x"|int(-1, 16) }} {{ "0b2"|int(-1, 2) }}`, "1000 -1 -1 -1 -1 -1"},
	{"int_unicode_digits", `{{ "٣"|int(-1) }} {{ "١٢"|int(-1) }} {{ " 42 "|int(-1) }} {{ "4 2"|int(-1) }}`, "3 12 42 -1"},
	{"int_via_float", `{{ "1e3"|int(-1) }} {{ "12.9"|int(-1) }} {{ "nan"|int(-1) }} {{ "inf"|int(-1) }} {{ "9223372036854775807"|int }} {{ "-9223372036854775808"|int }}`, "1000 12 -1 -1 9223372036854775807 -9223372036854775808"},
	{"float_overflow_is_inf", `{{ "1e400"|float(-1.5) }} {{ "-1e400"|float(-1.5) }} {{ "1e-400"|float(-1.5) }}`, "inf -inf 0.0"},
	{"float_texts", `{{ "+nan"|float(-1.5) }} {{ " -Inf "|float(-1.5) }} {{ "inFINity"|float(-1.5) }} {{ "1_000.5"|float(-1.5) }} {{ "1e1_0"|float(-1.5) }} {{ "-.5e-1"|float(-1.5) }} {{ "5."|float(-1.5) }}`, "nan -inf inf 1000.5 10000000000.0 -0.05 5.0"},
	{"float_unicode_digits", `{{ "٣.٥"|float(-1.5) }} {{ "١e٢"|float(-1.5) }}`, "3.5 100.0"},
	{"float_refused_texts", `{{ "0x1p4"|float(-1.5) }} {{ "0x10"|float(-1.5) }} {{ "1__0"|float(-1.5) }} {{ "1_e5"|float(-1.5) }} {{ "."|float(-1.5) }} {{ "1.5e"|float(-1.5) }} {{ "_1"|float(-1.5) }}`, "-1.5 -1.5 -1.5 -1.5 -1.5 -1.5 -1.5"},
	// Case changes use CPython's full case mappings: SpecialCasing's
	// one-to-many mappings and the Final_Sigma rule.
	{"upper_full_mapping", `{{ "straße"|upper }} {{ "ﬁx".upper() }} {{ "ŉ"|upper }} {{ "ᾳ".upper() }}`, "STRASSE FIX ʼN ΑΙ"},
	{"lower_full_mapping", `{{ "İ"|lower }} {{ "ΟΔΥΣΣΕΥΣ".lower() }} {{ "ΣΑΣ ΑΣ. Σ"|lower }}`, "i\u0307 οδυσσευς σας ας. σ"},
	{"title_full_mapping", `{{ "ﬁx ǆemal"|title }} {{ "ﬁx ǆemal".title() }} {{ "ﬁx".capitalize() }} {{ "ΑΣ"|title }} {{ "ΑΣ".title() }} {{ "ᾳ".title() }}`, "FIx Ǆemal Fix ǅemal Fix Ασ Ας ᾼ"},
	{"swapcase_and_case_tests", `{{ "ßΣ".swapcase() }} {{ "AΣ".swapcase() }} {{ "ǅ".isupper() }} {{ "ǅ".islower() }} {{ "ªb".islower() }} {{ "Ⓐ".isupper() }}`, "SSς aς False False True True"},
	{"numbers", "{{ '3'|int + 1 }} {{ 'x'|int }} {{ '2.5'|float }} {{ 2.5|round }} {{ 3.14159|round(2) }} {{ 7|round }}", "4 0 2.5 2.0 3.14 7"},
	{"indent", "{{ 'a\nb'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2) }}", "a\n  b|  a\n  b|a\n\n  b"},
	{"string_filter", "{{ 42|string ~ '' }} {{ [1]|string }}", "42 [1]"},
	{"wordcount_list_center", "{{ 'a b  c'|wordcount }} {{ 'ab'|list }} [{{ 'x'|center(5) }}]", "3 ['a', 'b'] [  x  ]"},
	{"tojson", `{{ {'a': [1, 2.0, none, true], 'é': 'x"y\n'}|tojson }}`, `{"a": [1, 2.0, null, true], "é": "x\"y\n"}`},
	{"tojson_indent", "{{ {'a': [1], 'b': {}}|tojson(indent=2) }}", "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}"},
	{"tojson_separators", "{{ {'a': 1, 'b': 2}|tojson(separators=(',', ':')) }}", `{"a":1,"b":2}`},
	{"tojson_sort_keys", "{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}", `{"a": 2, "b": 1}`},
	{"tojson_control", `{{ '\x01\x7f'|tojson }}`, "\"\\u0001\x7f\""},
	{"attr_filter", "{{ {'a': 1}|attr('a') }}", "1"},

	// str, dict and list methods.
	{"split", "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }}", "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c'] ['a,b', 'c']"},
	{"split_last", "{{ 'x</think>y'.split('</think>')[-1] }}", "y"},
	{"startswith_endswith", "{{ 'abc'.startswith('ab') }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.endswith('bc') }}", "True True True"},
	{"strip_methods", "{{ '\n\nx\n'.strip('\n') }}|{{ 'xxa'.lstrip('x') }}|{{ 'a  '.rstrip() }}|", "x|a|a|"},
	{"case_methods", "{{ 'Hello'.upper() }} {{ 'Hello'.lower() }} {{ 'hello world'.title() }}", "HELLO hello Hello World"},
	{"replace_method", "{{ 'aaa'.replace('a', 'b', 2) }} {{ 'ab'.replace('', '-') }}", "bba -a-b-"},
	{"find_count", "{{ 'abc'.find('c') }} {{ 'abc'.find('z') }} {{ 'abca'.count('a') }}", "2 -1 2"},
	{"dict_get", "{{ {'a': 1}.get('a') }} {{ {'a': 1}.get('b', 'x') }} {{ {'a': 1}.get('b') }}", "1 x None"},
	{"list_count", "{{ [1,2,1].count(1) }}", "2"},

	// Globals.
	{"range", "{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(3) }}", "[0, 1, 2] [1, 4, 7] [5, 3, 1] range(0, 3)"},
	{"dict_global", "{{ dict(a=1) }}", "{'a': 1}"},
	{"strftime_now", "{{ strftime_now('%Y-%m-%d %H:%M %a %B %-d %j %p %I %b %y') }}", "2025-03-07 14:30 Fri March 7 066 PM 02 Mar 25"},
}

func TestSemantics(t *testing.T) {
	for _, tc := range semanticCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := renderString(t, tc.src, nil)
			if err != nil {
				t.Fatalf("render %q: %v", tc.src, err)
			}
			if got != tc.want {
				t.Errorf("render %q\n got %q\nwant %q", tc.src, got, tc.want)
			}
		})
	}
}

func TestContextVariables(t *testing.T) {
	tp, err := Parse(`{{ messages|length }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|{{ bos_token }}|{{ eos_token }}|{{ flag }}|{{ messages[0].tool_calls[0].function.arguments.n }}|{{ messages[0].tool_calls[0].id is defined }}|{{ messages[1].content is none }}|{{ 'name' in messages[0] }}|{{ messages[2].content[0].text }}|{{ messages[2].content[1] }}|{{ messages[1].reasoning_content }}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tp.Render(Context{
		Messages: []Message{
			{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: map[string]any{"n": 1}}}},
			{Role: "assistant", NullContent: true, ReasoningContent: "r"},
			{Role: "user", Parts: []Part{{Type: "text", Text: "hi"}, {Type: "image"}}},
		},
		AddGenerationPrompt: true, BOSToken: "<s>", EOSToken: "</s>",
		Extra: map[string]any{"flag": json.RawMessage(`{"b": 1, "a": [true, null, 1.5]}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `3|None|None|True|<s>|</s>|{'b': 1, 'a': [True, None, 1.5]}|1|False|True|False|hi|{'type': 'image'}|r`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestNilVersusEmptyTools(t *testing.T) {
	tp, err := Parse(`{{ tools is none }} {{ tools|length if tools is not none else '-' }}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tools []any
		want  string
	}{{nil, "True -"}, {[]any{}, "False 0"}} {
		got, err := tp.Render(Context{Tools: tc.tools})
		if err != nil || got != tc.want {
			t.Errorf("Tools %#v: got %q (%v), want %q", tc.tools, got, err, tc.want)
		}
	}
}

func TestToolsKeyOrder(t *testing.T) {
	// json.RawMessage keeps the key order of the JSON text; a Go map has
	// none, so its keys are sorted.
	tp, err := Parse(`{% for t in tools %}{{ t|tojson }};{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tp.Render(Context{Tools: []any{
		json.RawMessage(`{"z": 1, "a": {"y": 2, "b": 3}, "z": 4}`),
		map[string]any{"z": 1, "a": 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"z": 4, "a": {"y": 2, "b": 3}}` + ";" + `{"a": 2, "z": 1}` + ";"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestChatMLAndDigest(t *testing.T) {
	if ChatML().Source() != ChatMLSource {
		t.Errorf("ChatML().Source() differs from ChatMLSource")
	}
	// One definition: the gguf reader's.
	for _, src := range []string{"", ChatMLSource, loadTemplate(t, "qwen3").Source()} {
		if got, want := Digest(src), gguf.TemplateDigest(src); got != want {
			t.Errorf("Digest(%.20q) = %x, want gguf.TemplateDigest = %x", src, got, want)
		}
	}
	if Digest(ChatMLSource) == Digest(ChatMLSource+" ") {
		t.Errorf("Digest does not change when the text changes")
	}
	// The digest is of the exact bytes: CRLF and LF texts differ even
	// though they render the same.
	if Digest("a\nb") == Digest("a\r\nb") {
		t.Errorf("Digest normalised newlines")
	}
	// A regression pin (computed once with this definition): changing the
	// definition changes every pack identity, so it must be deliberate.
	const want = "76a6418a7374051d7f7d0d8e4c1d74332d93b9a11a057419469ce7340cc943a7"
	if got := hexString(Digest("")); got != want {
		t.Errorf("Digest(\"\") = %s, want %s", got, want)
	}
}

func hexString(b [32]byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 64)
	for i, c := range b {
		out[2*i] = digits[c>>4]
		out[2*i+1] = digits[c&15]
	}
	return string(out)
}

func TestDetectFamily(t *testing.T) {
	for _, tc := range []struct {
		template string
		want     Family
	}{
		{"llama-3.1", FamilyLlama3}, {"llama-3.2", FamilyLlama3}, {"qwen2.5", FamilyQwen2}, {"qwen3", FamilyQwen3},
		{"smollm2", FamilySmolLM2}, {"mistral-v0.3", FamilyMistral}, {"mistral-nemo", FamilyMistral},
		{"phi-3", FamilyPhi3}, {"phi-3.5", FamilyPhi3}, {"gemma-2", FamilyGemma}, {"gemma-3", FamilyGemma},
		{"deepseek-v2", FamilyDeepSeek}, {"deepseek-v3", FamilyDeepSeek}, {"deepseek-r1", FamilyDeepSeek},
	} {
		if got := DetectFamily(loadTemplate(t, tc.template).Source()); got != tc.want {
			t.Errorf("DetectFamily(%s) = %s, want %s", tc.template, got, tc.want)
		}
	}
	if got := DetectFamily(ChatMLSource); got != FamilyChatML {
		t.Errorf("DetectFamily(ChatMLSource) = %s, want %s", got, FamilyChatML)
	}
	if got := DetectFamily("{{ x }}"); got != FamilyUnknown {
		t.Errorf("DetectFamily(other) = %s, want %s", got, FamilyUnknown)
	}
}

// TestConcurrentRender renders one Template from many goroutines (run
// with -race): a parsed template is shared by every request.
func TestConcurrentRender(t *testing.T) {
	tp := loadTemplate(t, "qwen3")
	want := renderCase(t, tp, imTokens, "parallel")
	errs := make(chan string, 16)
	for g := 0; g < 16; g++ {
		go func() {
			got := ""
			for i := 0; i < 20; i++ {
				ctx := conversations["parallel"]()
				ctx.BOSToken, ctx.EOSToken = imTokens.bos, imTokens.eos
				out, err := tp.Render(ctx)
				if err != nil {
					got = err.Error()
					break
				}
				if out != want {
					got = out
					break
				}
			}
			errs <- got
		}()
	}
	for g := 0; g < 16; g++ {
		if got := <-errs; got != "" {
			t.Errorf("concurrent render gave %q, want %q", got, want)
		}
	}
}

// TestDefaultModelTemplate checks that the embedded default model's
// template renders every conversation without tools exactly as
// ChatMLSource, the template used for models without one, so its training
// format and the fallback render the same bytes. (With tools it adds
// Qwen2.5's tool sections; package defaultmodel tests those.)
func TestDefaultModelTemplate(t *testing.T) {
	dm, err := Parse(defaultmodel.ChatTemplate)
	if err != nil {
		t.Fatal(err)
	}
	convs := [][]Message{
		nil,
		{{Role: "user", Content: "Hi"}},
		{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is 3 plus 4?"}, {Role: "assistant", Content: "3 plus 4 is 7."}, {Role: "user", Content: "And 5?"}},
		{{Role: "assistant", Content: ""}, {Role: "narrator", Content: "{{ x }} <|im_end|>\n"}},
	}
	for i, msgs := range convs {
		for _, gen := range []bool{false, true} {
			for _, tools := range [][]any{nil, {}} {
				ctx := Context{Messages: msgs, Tools: tools, AddGenerationPrompt: gen}
				want, err := ChatML().Render(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := dm.Render(ctx); err != nil || got != want {
					t.Errorf("conversation %d (generation prompt %v, tools %v): defaultmodel.ChatTemplate renders %q, %v; ChatMLSource %q", i, gen, tools, got, err, want)
				}
			}
		}
	}
}
