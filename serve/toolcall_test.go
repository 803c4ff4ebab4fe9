package serve

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestDetectToolFormat(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      toolFormat
	}{
		{"qwen", "{%- if tools %}<|im_start|>system\n<tools>{{ tool | tojson }}</tools><tool_call>{% endif %}", toolFormatHermes},
		{"mistral", "[INST]{{ m }}[/INST]{% if tools %}[AVAILABLE_TOOLS]{% endif %}[TOOL_CALLS]", toolFormatMistral},
		{"llama 3.1", "<|start_header_id|>ipython<|end_header_id|>{{ '<|python_tag|>' }}", toolFormatLlama3},
		{"llama 3.2", "<|start_header_id|>{{ role }}<|end_header_id|>{% if role == 'ipython' %}{% endif %}", toolFormatLlama3},
		{"plain chatml", "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>'}}", toolFormatHermes},
		{"llama 3 without tools", "<|start_header_id|>{{ role }}<|end_header_id|>", toolFormatNone},
		{"gemma", "<start_of_turn>{{ role }}", toolFormatNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := detectToolFormat(c.src); got != c.want {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestParseToolCalls(t *testing.T) {
	weather := toolCall{Name: "get_weather", Arguments: `{"city":"Paris","days":2}`}
	for _, c := range []struct {
		name    string
		f       toolFormat
		text    string
		content string
		calls   []toolCall
	}{
		{"hermes one call", toolFormatHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>", "", []toolCall{weather}},
		{"hermes text and two calls", toolFormatHermes, "Sure. <tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call><tool_call>{\"name\":\"b\",\"arguments\":{\"x\":[1,2]}}</tool_call>",
			"Sure. ", []toolCall{{Name: "a", Arguments: "{}"}, {Name: "b", Arguments: `{"x":[1,2]}`}}},
		{"hermes unclosed at the end", toolFormatHermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}", "", []toolCall{weather}},
		{"hermes stringified arguments", toolFormatHermes, `<tool_call>{"name":"f","arguments":"{\"k\": 1}"}</tool_call>`, "", []toolCall{{Name: "f", Arguments: `{"k":1}`}}},
		{"hermes missing arguments", toolFormatHermes, `<tool_call>{"name":"f"}</tool_call>`, "", []toolCall{{Name: "f", Arguments: `{}`}}},
		{"hermes bad json is text", toolFormatHermes, "<tool_call>{\"name\": </tool_call> after", "<tool_call>{\"name\": </tool_call> after", nil},
		{"hermes committed call cut short", toolFormatHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"x y", "", []toolCall{{Name: "f", Arguments: `{"a":"x y`, Partial: true}}},
		{"hermes committed call malformed", toolFormatHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\" 1}}</tool_call>ok", "ok", []toolCall{{Name: "f", Arguments: `{"a"1}`, Partial: true}}},
		{"hermes committed call with trailing keys", toolFormatHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}, \"id\": 3}</tool_call>", "", []toolCall{{Name: "f", Arguments: `{"a":[1,2]}`}}},
		{"hermes no name is text", toolFormatHermes, `<tool_call>{"arguments":{}}</tool_call>`, `<tool_call>{"arguments":{}}</tool_call>`, nil},
		{"hermes array arguments is text", toolFormatHermes, `<tool_call>{"name":"f","arguments":[1]}</tool_call>`, `<tool_call>{"name":"f","arguments":[1]}</tool_call>`, nil},
		{"hermes good then bad", toolFormatHermes, `<tool_call>{"name":"a","arguments":{}}</tool_call>x<tool_call>oops`, "x<tool_call>oops", []toolCall{{Name: "a", Arguments: "{}"}}},
		{"hermes plain text", toolFormatHermes, "Once upon a time", "Once upon a time", nil},
		{"llama3 parameters", toolFormatLlama3, ` {"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}`, "", []toolCall{weather}},
		{"llama3 python tag, two calls", toolFormatLlama3, `<|python_tag|>{"name":"a","parameters":{}}; {"name":"b","parameters":{"y":true}}`, "", []toolCall{{Name: "a", Arguments: "{}"}, {Name: "b", Arguments: `{"y":true}`}}},
		{"llama3 text", toolFormatLlama3, "The weather {is} fine", "The weather {is} fine", nil},
		{"llama3 trailing junk is text", toolFormatLlama3, `{"name":"a","parameters":{}} and more`, `{"name":"a","parameters":{}} and more`, nil},
		{"mistral array", toolFormatMistral, `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}, "id": "abcdefghi"}]`, "", []toolCall{weather}},
		{"mistral array without marker", toolFormatMistral, `[{"name":"a","arguments":{}}]`, "", []toolCall{{Name: "a", Arguments: "{}"}}},
		{"mistral args form", toolFormatMistral, `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 2}[TOOL_CALLS]a[ARGS]{}`, "", []toolCall{weather, {Name: "a", Arguments: "{}"}}},
		{"mistral text", toolFormatMistral, "Hello [TOOL_CALLS] there", "Hello [TOOL_CALLS] there", nil},
		{"none", toolFormatNone, `<tool_call>{"name":"a","arguments":{}}</tool_call>`, `<tool_call>{"name":"a","arguments":{}}</tool_call>`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			content, calls := parseToolCalls(c.f, c.text)
			if content != c.content || !slices.Equal(calls, c.calls) {
				t.Errorf("got content %q calls %v, want %q %v", content, calls, c.content, c.calls)
			}
			// Streamed at every split into three pieces, the same.
			for i := 0; i <= len(c.text); i++ {
				for j := i; j <= len(c.text); j += 1 + len(c.text)/7 {
					gc, gcalls := streamToolCalls(c.f, c.text[:i], c.text[i:j], c.text[j:])
					if gc != content || !slices.Equal(gcalls, calls) {
						t.Fatalf("streamed split at %d, %d: got content %q calls %v, want %q %v", i, j, gc, gcalls, content, calls)
					}
				}
			}
		})
	}
}

// TestToolStreamReleasesArgs checks that a Hermes call is released as it
// is written: its name once its head is read, then each piece of its
// arguments as it arrives (white space outside strings dropped), before
// the block closes.
func TestToolStreamReleasesArgs(t *testing.T) {
	ts := &toolStream{f: toolFormatHermes, record: true}
	for _, c := range []struct {
		write string
		want  []streamPiece
	}{
		{"Sure. <tool", []streamPiece{{Text: "Sure. "}}},
		{"_call>\n{\"name\": \"get_weather\", ", nil},
		{"\"arguments\": {\"city\": ", []streamPiece{{Name: "get_weather"}, {Args: `{"city":`}}},
		{"\"Par", []streamPiece{{Args: `"Par`}}},
		{"is\", \"days\": 2", []streamPiece{{Args: `is","days":2`}}},
		{"}}\n</tool_call>", []streamPiece{{Args: "}"}, {Call: &toolCall{Name: "get_weather", Arguments: `{"city":"Paris","days":2}`}, Streamed: true}}},
	} {
		ts.write(c.write)
		got := ts.drain()
		if len(got) != len(c.want) {
			t.Fatalf("after %q: got pieces %+v, want %+v", c.write, got, c.want)
		}
		for i, p := range got {
			w := c.want[i]
			if p.Text != w.Text || p.Name != w.Name || p.Args != w.Args || p.Streamed != w.Streamed ||
				(p.Call == nil) != (w.Call == nil) || p.Call != nil && *p.Call != *w.Call {
				t.Fatalf("after %q: got piece %d %+v, want %+v", c.write, i, p, w)
			}
		}
	}
}

// streamToolCalls runs pieces through a toolStream and checks that its
// recorded pieces tell the same story: the same text, and each call's
// streamed start and arguments matching the call.
func streamToolCalls(f toolFormat, pieces ...string) (string, []toolCall) {
	ts := &toolStream{f: f, record: true}
	var (
		content string
		calls   []toolCall
	)
	for _, p := range pieces {
		c, cs := ts.write(p)
		content += c
		calls = append(calls, cs...)
	}
	c, cs := ts.flush()
	content, calls = content+c, append(calls, cs...)
	var (
		text    strings.Builder
		names   = map[int]string{}
		args    = map[int]string{}
		replay  []toolCall
		badNote string
	)
	for _, p := range ts.drain() {
		switch {
		case p.Call != nil:
			if p.Streamed && (names[p.Index] != p.Call.Name || args[p.Index] != p.Call.Arguments) {
				badNote = fmt.Sprintf("call %d streamed as %q %q, finished as %+v", p.Index, names[p.Index], args[p.Index], *p.Call)
			}
			replay = append(replay, *p.Call)
		case p.Name != "":
			names[p.Index] = p.Name
		case p.Args != "":
			args[p.Index] += p.Args
		default:
			text.WriteString(p.Text)
		}
	}
	if badNote != "" || text.String() != content || !slices.Equal(replay, calls) {
		return fmt.Sprintf("pieces disagree: %s; text %q; calls %v", badNote, text.String(), replay), nil
	}
	return content, calls
}

func TestToolCallID(t *testing.T) {
	a, b, c := toolCallID("req1", 0, 0), toolCallID("req1", 0, 1), toolCallID("req1", 1, 0)
	if a == b || a == c || b == c {
		t.Errorf("ids collide: %s %s %s", a, b, c)
	}
	if again := toolCallID("req1", 0, 0); again != a {
		t.Errorf("got %s for the same request, want %s", again, a)
	}
	if len(a) != len("call_")+24 {
		t.Errorf("id %q is %d characters, want %d", a, len(a), len("call_")+24)
	}
}

// FuzzToolCalls parses arbitrary replies in every format: nothing may
// panic, every call has a name and object arguments, and streaming the
// reply in two pieces gives what parsing it whole gives.
func FuzzToolCalls(f *testing.F) {
	for _, s := range []string{
		`<tool_call>{"name":"a","arguments":{"x":1}}</tool_call>`, `text<tool_call>{"name":"b"}`,
		`<|python_tag|>{"name":"a","parameters":{}}; {"name":"b","parameters":{}}`,
		`[TOOL_CALLS][{"name":"a","arguments":{}}]`, `[TOOL_CALLS]f[ARGS]{"a":"b"}`, "<tool_", "",
	} {
		f.Add(s, uint8(1), uint16(3))
	}
	f.Fuzz(func(t *testing.T, text string, format uint8, split uint16) {
		ff := toolFormat(format % 4)
		content, calls := parseToolCalls(ff, text)
		for _, c := range calls {
			if c.Partial {
				continue
			}
			if c.Name == "" {
				t.Fatalf("a call with no name from %q", text)
			}
			if _, ok := argumentsObject([]byte(c.Arguments)); !ok {
				t.Fatalf("call arguments %q are not a JSON object", c.Arguments)
			}
		}
		i := int(split) % (len(text) + 1)
		sc, scalls := streamToolCalls(ff, text[:i], text[i:])
		if sc != content || !slices.Equal(scalls, calls) {
			t.Fatalf("format %v, split %d of %q: streamed %q %v, whole %q %v", ff, i, text, sc, scalls, content, calls)
		}
	})
}
