package main

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/defaultmodel/evalset"
	"github.com/muserhq/muser/infer/template"
)

// templateContext converts a tool conversation to what a server passes the
// chat template: the messages, and the tools as JSON values that keep
// their key order.
func templateContext(c toolConv) template.Context {
	var ctx template.Context
	for _, t := range c.tools {
		ctx.Tools = append(ctx.Tools, json.RawMessage(t))
	}
	for i, m := range c.msgs {
		tm := template.Message{Role: m.role, Content: m.content}
		for _, cl := range m.calls {
			tm.ToolCalls = append(tm.ToolCalls, template.ToolCall{ID: "call_" + strconv.Itoa(i), Name: cl.name, Arguments: json.RawMessage(argsJSON(cl.args))})
		}
		if len(m.calls) > 0 {
			tm.NullContent = true
		}
		ctx.Messages = append(ctx.Messages, tm)
	}
	return ctx
}

func testToolSet() toolSet {
	return toolSet{cat: catalog(), tasks: tasks(), excluded: excludedPrompts()}
}

// TestToolChatsRenderAsTemplate renders thousands of generated tool
// conversations through muser's Jinja engine with the model's chat
// template and compares the bytes with corpusgen's own rendering.
func TestToolChatsRenderAsTemplate(t *testing.T) {
	tm, err := template.Parse(defaultmodel.ChatTemplate)
	if err != nil {
		t.Fatal(err)
	}
	ts := testToolSet()
	for seed := uint64(1); seed <= 3000; seed++ {
		c := toolChat(newRNG(seed), ts)
		want, err := tm.Render(templateContext(c))
		if err != nil {
			t.Fatalf("seed %d: template: %v", seed, err)
		}
		if got := c.render(); got != want {
			t.Fatalf("seed %d: corpusgen wrote\n%s\nthe template renders\n%s", seed, got, want)
		}
	}
}

// TestJSONChatsRenderAsTemplate does the same for the JSON-answer
// conversations (plain ChatML, no tools).
func TestJSONChatsRenderAsTemplate(t *testing.T) {
	tm, err := template.Parse(defaultmodel.ChatTemplate)
	if err != nil {
		t.Fatal(err)
	}
	facts := jsonFacts()
	for seed := uint64(1); seed <= 1000; seed++ {
		text := jsonChat(newRNG(seed), facts, excludedPrompts())
		msgs, err := parseChat(text)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var ctx template.Context
		for _, m := range msgs {
			ctx.Messages = append(ctx.Messages, template.Message{Role: m.role, Content: m.content})
		}
		if got, err := tm.Render(ctx); err != nil || got != text {
			t.Fatalf("seed %d: template renders %q, %v; corpusgen wrote %q", seed, got, err, text)
		}
	}
}

func TestCatalogToolsAreValidJSON(t *testing.T) {
	cat := catalog()
	if len(cat) < 20 {
		t.Fatalf("catalog has %d tools, want at least 20", len(cat))
	}
	seen := map[string]bool{}
	for _, tl := range cat {
		if seen[tl.name] {
			t.Fatalf("two tools named %s", tl.name)
		}
		seen[tl.name] = true
		for _, desc := range []bool{false, true} {
			var v struct {
				Type     string `json:"type"`
				Function struct {
					Name       string `json:"name"`
					Parameters struct {
						Properties map[string]map[string]string `json:"properties"`
						Required   []string                     `json:"required"`
					} `json:"parameters"`
				} `json:"function"`
			}
			if err := json.Unmarshal([]byte(tl.json(desc)), &v); err != nil {
				t.Fatalf("%s: %v", tl.name, err)
			}
			if v.Type != "function" || v.Function.Name != tl.name || len(v.Function.Parameters.Required) != len(tl.params) {
				t.Fatalf("%s: decoded %+v", tl.name, v)
			}
			for _, p := range tl.params {
				if v.Function.Parameters.Properties[p.name]["type"] != p.typ {
					t.Fatalf("%s: parameter %s decoded as %v", tl.name, p.name, v.Function.Parameters.Properties[p.name])
				}
			}
		}
	}
}

// TestEvalToolsAreCatalogTools checks that the held-out requests offer the
// tools exactly as the corpus writes them.
func TestEvalToolsAreCatalogTools(t *testing.T) {
	byName := map[string]string{}
	for _, tl := range catalog() {
		byName[tl.name] = tl.json(false)
	}
	for _, q := range evalset.ToolRequests() {
		for i, js := range q.Tools {
			var v struct {
				Function struct{ Name string } `json:"function"`
			}
			if err := json.Unmarshal([]byte(js), &v); err != nil {
				t.Fatal(err)
			}
			if byName[v.Function.Name] != js {
				t.Fatalf("%q tool %d:\n%s\nthe catalog writes\n%s", q.Prompt, i, js, byName[v.Function.Name])
			}
		}
	}
}

// TestCallsCopyTheUserText checks every generated call: a tool that was
// offered, arguments in the order of its parameters with the right types,
// every argument's text in the user's request, and a right arithmetic
// result.
func TestCallsCopyTheUserText(t *testing.T) {
	for _, tl := range catalog() {
		t.Run(tl.name, func(t *testing.T) {
			r := newRNG(3)
			for i := 0; i < 300; i++ {
				c := tl.make(r)
				if len(c.args) != len(tl.params) {
					t.Fatalf("%q: %d arguments, want %d", c.user, len(c.args), len(tl.params))
				}
				for j, a := range c.args {
					p := tl.params[j]
					var s string
					switch v := a.val.(type) {
					case int:
						s = strconv.Itoa(v)
						if p.typ != "integer" {
							t.Fatalf("%q: argument %s is an int, parameter type %s", c.user, a.key, p.typ)
						}
					case string:
						s = v
						if p.typ != "string" {
							t.Fatalf("%q: argument %s is a string, parameter type %s", c.user, a.key, p.typ)
						}
					}
					if a.key != p.name || !strings.Contains(c.user, s) {
						t.Fatalf("%q: argument %s=%q is not the parameter %s copied from the request", c.user, a.key, s, p.name)
					}
				}
				var res map[string]any
				if err := json.Unmarshal([]byte(c.result), &res); err != nil {
					t.Fatalf("result %q: %v", c.result, err)
				}
				if tl.name == "add" || tl.name == "subtract" || tl.name == "multiply" {
					a, b := c.args[0].val.(int), c.args[1].val.(int)
					want := map[string]int{"add": a + b, "subtract": a - b, "multiply": a * b}[tl.name]
					if res["result"] != float64(want) || want < 0 || !strings.HasSuffix(c.answer, " "+strconv.Itoa(want)+".") {
						t.Fatalf("%q: result %s, answer %q, want %d", c.user, c.result, c.answer, want)
					}
				}
			}
		})
	}
}

// TestToolChatShapes checks the conversations' structure over many seeds:
// one to four distinct tools, calls only of offered tools, each call
// followed by its response and an answer, and both calls and plain answers
// present.
func TestToolChatShapes(t *testing.T) {
	ts := testToolSet()
	var calls, plain, two int
	sizes := map[int]int{}
	for seed := uint64(1); seed <= 4000; seed++ {
		c := toolChat(newRNG(seed), ts)
		sizes[len(c.tools)]++
		offered := map[string]bool{}
		for _, js := range c.tools {
			var v struct {
				Function struct{ Name string } `json:"function"`
			}
			if err := json.Unmarshal([]byte(js), &v); err != nil {
				t.Fatal(err)
			}
			if offered[v.Function.Name] {
				t.Fatalf("seed %d: %s offered twice", seed, v.Function.Name)
			}
			offered[v.Function.Name] = true
		}
		msgs := c.msgs
		if len(msgs) > 0 && msgs[0].role == "system" {
			msgs = msgs[1:]
		}
		exchanges := 0
		for i := 0; i < len(msgs); {
			if msgs[i].role != "user" || i+1 >= len(msgs) || msgs[i+1].role != "assistant" {
				t.Fatalf("seed %d: message %d is not a user turn answered by the assistant", seed, i)
			}
			exchanges++
			if cl := msgs[i+1].calls; len(cl) > 0 {
				if len(cl) != 1 || !offered[cl[0].name] {
					t.Fatalf("seed %d: calls %v, offered %v", seed, cl, offered)
				}
				if i+3 >= len(msgs) || msgs[i+2].role != "tool" || msgs[i+3].role != "assistant" || len(msgs[i+3].calls) > 0 {
					t.Fatalf("seed %d: the call is not followed by a tool response and an answer", seed)
				}
				calls++
				i += 4
				continue
			}
			plain++
			i += 2
		}
		if exchanges == 2 {
			two++
		}
	}
	if sizes[1] == 0 || sizes[4] == 0 || sizes[0] != 0 || sizes[5] != 0 {
		t.Fatalf("tools offered per conversation: %v, want 1 to 4", sizes)
	}
	if calls == 0 || plain == 0 || two == 0 {
		t.Fatalf("got %d calls, %d plain answers, %d two-request conversations; want each", calls, plain, two)
	}
	if f := float64(plain) / float64(calls+plain); f < 0.10 || f > 0.20 {
		t.Fatalf("plain answers are %.3f of the requests, want about 0.15", f)
	}
}

// TestNoToolAnswersAvoidOfferedTools checks that a question answered
// without a call is never one an offered tool covers.
func TestNoToolAnswersAvoidOfferedTools(t *testing.T) {
	ts := testToolSet()
	ask := map[string]*regexpish{
		"get_capital": {[]string{"capital"}}, "spell_word": {[]string{"spell"}}, "count_legs": {[]string{"legs"}}, "get_colour": {[]string{"colour", "color"}},
	}
	for seed := uint64(1); seed <= 3000; seed++ {
		c := toolChat(newRNG(seed), ts)
		names := map[string]bool{}
		for _, js := range c.tools {
			var v struct {
				Function struct{ Name string } `json:"function"`
			}
			_ = json.Unmarshal([]byte(js), &v)
			names[v.Function.Name] = true
		}
		for i, m := range c.msgs {
			if m.role != "user" || i+1 >= len(c.msgs) || len(c.msgs[i+1].calls) > 0 {
				continue
			}
			for name, w := range ask {
				if names[name] && w.in(m.content) {
					t.Fatalf("seed %d: %q answered without calling the offered %s", seed, m.content, name)
				}
			}
		}
	}
}

// regexpish matches a question that mentions any of its words.
type regexpish struct{ words []string }

func (r *regexpish) in(s string) bool {
	s = strings.ToLower(s)
	for _, w := range r.words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// TestHeldOutToolRequestsAreExcluded shows each held-out request is one
// the generator can produce (so it is in distribution) and that the corpus
// never contains it.
func TestHeldOutToolRequestsAreExcluded(t *testing.T) {
	byName := map[string]tool{}
	for _, tl := range catalog() {
		byName[tl.name] = tl
	}
	for _, q := range evalset.ToolRequests() {
		t.Run(q.Prompt, func(t *testing.T) {
			tl, ok := byName[q.Name]
			if !ok {
				t.Fatalf("no catalog tool %s", q.Name)
			}
			r := newRNG(9)
			for i := 0; ; i++ {
				c := tl.make(r)
				if c.user == q.Prompt {
					if got := argsJSON(c.args); !(evalset.ToolRequest{Name: q.Name, Arguments: q.Arguments}).CheckCall(tl.name, []byte(got)) {
						t.Fatalf("the generator calls %s with %s for %q, the request wants %s", tl.name, got, q.Prompt, q.Arguments)
					}
					break
				}
				if i == 2_000_000 {
					t.Fatalf("%s never produced %q in 2,000,000 draws", q.Name, q.Prompt)
				}
			}
		})
	}
	excluded := evalset.ToolPrompts()
	n := 0
	for i, d := range docs(t, gen(t, 1, 3_000_000)) {
		msgs, err := parseChat(d.Text)
		if d.Kind != "story" && err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		for _, m := range msgs {
			if m.role == "user" && excluded[m.content] {
				t.Fatalf("doc %d: held-out tool request %q in the corpus", i, m.content)
			}
		}
		if d.Kind == "tool" {
			n++
		}
	}
	if n < 500 {
		t.Fatalf("3 MB of corpus has %d tool documents, want at least 500", n)
	}
}

func TestJSONAnswersAreObjects(t *testing.T) {
	n := 0
	for i, d := range docs(t, gen(t, 4, 3_000_000)) {
		if d.Kind != "json" {
			continue
		}
		msgs, err := parseChat(d.Text)
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		var schema string
		if msgs[0].role == "system" {
			if _, s, ok := strings.Cut(msgs[0].content, "schema: "); ok {
				schema = s
			}
		} else if !strings.Contains(msgs[0].content, "JSON") {
			t.Fatalf("doc %d: no system prompt and the user does not ask for JSON: %q", i, msgs[0].content)
		}
		for _, m := range msgs {
			if m.role != "assistant" {
				continue
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(m.content), &v); err != nil {
				t.Fatalf("doc %d: answer %q: %v", i, m.content, err)
			}
			if schema != "" {
				var s struct {
					Required []string `json:"required"`
				}
				if err := json.Unmarshal([]byte(schema), &s); err != nil {
					t.Fatalf("doc %d: schema %q: %v", i, schema, err)
				}
				var keys []string
				for k := range v {
					keys = append(keys, k)
				}
				if len(keys) != len(s.Required) {
					t.Fatalf("doc %d: answer keys %v, schema requires %v", i, keys, s.Required)
				}
				for _, k := range s.Required {
					if _, ok := v[k]; !ok {
						t.Fatalf("doc %d: answer %q lacks %q", i, m.content, k)
					}
				}
			}
			n++
		}
	}
	if n < 100 {
		t.Fatalf("checked %d JSON answers, want at least 100", n)
	}
}

// TestJSONAnswersAreRight checks the facts in the JSON answers against the
// corpus's tables.
func TestJSONAnswersAreRight(t *testing.T) {
	legs := map[string]float64{}
	for _, a := range animals {
		legs[a.name] = float64(a.legs)
	}
	caps := map[string]string{}
	for _, c := range capitals {
		caps[c.country] = c.city
	}
	r := newRNG(6)
	facts := jsonFacts()
	for i := 0; i < 3000; i++ {
		f := pick(r, facts)(r)
		var v map[string]any
		if err := json.Unmarshal([]byte(argsJSON(f.fields)), &v); err != nil {
			t.Fatal(err)
		}
		var ind map[string]any
		if err := json.Unmarshal([]byte(indentedJSON(f.fields)), &ind); err != nil || !reflect.DeepEqual(ind, v) {
			t.Fatalf("indented %q decodes to %v, %v; want %v", indentedJSON(f.fields), ind, err, v)
		}
		switch {
		case v["sum"] != nil && v["sum"] != v["a"].(float64)+v["b"].(float64),
			v["difference"] != nil && v["difference"] != v["a"].(float64)-v["b"].(float64),
			v["product"] != nil && v["product"] != v["a"].(float64)*v["b"].(float64),
			v["legs"] != nil && v["legs"] != legs[v["animal"].(string)],
			v["capital"] != nil && v["capital"] != caps[v["country"].(string)]:
			t.Fatalf("%q: wrong answer %s", f.user, argsJSON(f.fields))
		}
	}
}

func TestMixOfKinds(t *testing.T) {
	counts := map[string]float64{}
	all := docs(t, gen(t, 5, 4_000_000))
	for _, d := range all {
		counts[d.Kind]++
	}
	want := map[string]float64{"story": 0.30, "chat": 0.50, "tool": 0.15, "json": 0.05}
	for k, w := range want {
		if got := counts[k] / float64(len(all)); got < w-0.02 || got > w+0.02 {
			t.Errorf("%s: %.3f of %d documents, want %.2f", k, got, len(all), w)
		}
	}
	if len(counts) != len(want) {
		t.Errorf("kinds %v, want %v", counts, want)
	}
}

func TestToolEvalJSON(t *testing.T) {
	var b bytes.Buffer
	if err := run([]string{"-tool-eval", "-"}, &b, io.Discard); err != nil {
		t.Fatal(err)
	}
	var items []toolEvalItem
	if err := json.Unmarshal(b.Bytes(), &items); err != nil {
		t.Fatal(err)
	}
	qs := evalset.ToolRequests()
	if len(items) != len(qs) {
		t.Fatalf("got %d items, want %d", len(items), len(qs))
	}
	for i, it := range items {
		q := qs[i]
		// The same prompt as corpusgen renders a conversation with these
		// tools and this user message, plus the generation prompt.
		conv := toolConv{tools: q.Tools, msgs: []cmsg{{role: "user", content: q.Prompt}}}
		if want := conv.render() + "<|im_start|>assistant\n"; it.Text != want {
			t.Fatalf("item %d text\n%s\nwant\n%s", i, it.Text, want)
		}
		if it.Prompt != q.Prompt || it.Name != q.Name || !(evalset.ToolRequest{Name: q.Name, Arguments: q.Arguments}).CheckCall(it.Name, it.Arguments) {
			t.Fatalf("item %d = %+v, want the fields of %+v", i, it, q)
		}
	}
}

func TestTemplateFlag(t *testing.T) {
	var b bytes.Buffer
	if err := run([]string{"-template", "-"}, &b, io.Discard); err != nil {
		t.Fatal(err)
	}
	if b.String() != defaultmodel.ChatTemplate {
		t.Fatalf("-template wrote %d bytes, want defaultmodel.ChatTemplate (%d bytes)", b.Len(), len(defaultmodel.ChatTemplate))
	}
}

// TestTemplateCases checks -template-cases: every case, converted to
// infer/template's messages, renders through the chat template to its text.
func TestTemplateCases(t *testing.T) {
	var b bytes.Buffer
	if err := run([]string{"-template-cases", "-"}, &b, io.Discard); err != nil {
		t.Fatal(err)
	}
	var cases []templateCase
	if err := json.Unmarshal(b.Bytes(), &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) != 500 {
		t.Fatalf("got %d cases, want 500", len(cases))
	}
	tm, err := template.Parse(defaultmodel.ChatTemplate)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for i, c := range cases {
		var ctx template.Context
		for _, tl := range c.Tools {
			ctx.Tools = append(ctx.Tools, tl)
		}
		for _, m := range c.Messages {
			tmm := template.Message{Role: m.Role, NullContent: m.Content == nil}
			if m.Content != nil {
				tmm.Content = *m.Content
			}
			for _, cl := range m.ToolCalls {
				tmm.ToolCalls = append(tmm.ToolCalls, template.ToolCall{Name: cl.Function.Name, Arguments: cl.Function.Arguments})
				calls++
			}
			ctx.Messages = append(ctx.Messages, tmm)
		}
		if got, err := tm.Render(ctx); err != nil || got != c.Text {
			t.Fatalf("case %d renders %q, %v; want %q", i, got, err, c.Text)
		}
	}
	if calls == 0 {
		t.Fatal("no case has a tool call")
	}
}
