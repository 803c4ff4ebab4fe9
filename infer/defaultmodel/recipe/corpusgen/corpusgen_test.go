package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel/evalset"
)

func gen(t *testing.T, seed uint64, size int64) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := generate(&b, seed, size, defaultMix); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func docs(t *testing.T, data []byte) []doc {
	t.Helper()
	var out []doc
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var d doc
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("line %d: %v", len(out)+1, err)
		}
		out = append(out, d)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// message is one parsed ChatML message.
type message struct{ role, content string }

// parseChat splits a rendered conversation into messages, failing on
// anything that is not exactly "<|im_start|>role\ncontent<|im_end|>\n"
// repeated.
func parseChat(text string) ([]message, error) {
	var out []message
	for rest := text; rest != ""; {
		if !strings.HasPrefix(rest, "<|im_start|>") {
			return nil, fmt.Errorf("message %d does not start with <|im_start|>: %q", len(out), rest)
		}
		rest = rest[len("<|im_start|>"):]
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("message %d: no newline after the role", len(out))
		}
		role := rest[:nl]
		rest = rest[nl+1:]
		end := strings.Index(rest, "<|im_end|>\n")
		if end < 0 {
			return nil, fmt.Errorf("message %d: no <|im_end|>\\n", len(out))
		}
		content := rest[:end]
		if strings.Contains(content, "<|im_start|>") || strings.Contains(content, "<|im_end|>") {
			return nil, fmt.Errorf("message %d: special token inside content %q", len(out), content)
		}
		out = append(out, message{role, content})
		rest = rest[end+len("<|im_end|>\n"):]
	}
	return out, nil
}

func TestGenerateIsDeterministic(t *testing.T) {
	a := gen(t, 7, 300_000)
	b := gen(t, 7, 300_000)
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs with seed 7 differ (%d and %d bytes)", len(a), len(b))
	}
	c := gen(t, 8, 300_000)
	if bytes.Equal(a[:100_000], c[:100_000]) {
		t.Fatal("seeds 7 and 8 give the same first 100 kB")
	}
	if int64(len(a)) < 300_000 {
		t.Fatalf("got %d bytes, want at least 300000", len(a))
	}
}

func TestRunWritesFileEqualToStdout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.jsonl")
	if err := run([]string{"-seed", "3", "-size", "50000", "-o", path}, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if err := run([]string{"-seed", "3", "-size", "50000"}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, stdout.Bytes()) {
		t.Fatalf("file (%d bytes) differs from stdout (%d bytes)", len(got), stdout.Len())
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-size", "0"},
		{"-stories", "1.5"},
		{"-stories", "-0.1"},
		{"-tools", "1.5"},
		{"-json", "NaN"},
		{"-stories", "0.6", "-tools", "0.3", "-json", "0.2"},
		{"extra"},
		{"-nosuchflag"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if err := run(args, &bytes.Buffer{}, io.Discard); err == nil {
				t.Fatalf("run(%q) = nil, want an error", args)
			}
		})
	}
}

func TestChatsAreExactChatML(t *testing.T) {
	var chats, stories int
	for i, d := range docs(t, gen(t, 1, 1_000_000)) {
		switch d.Kind {
		case "story":
			stories++
			if strings.Contains(d.Text, "<|") {
				t.Fatalf("doc %d: story contains a special token: %q", i, d.Text)
			}
			continue
		case "chat", "tool", "json":
			chats++
		default:
			t.Fatalf("doc %d: kind %q, want story, chat, tool or json", i, d.Kind)
		}
		msgs, err := parseChat(d.Text)
		if err != nil {
			t.Fatalf("doc %d: %v\n%s", i, err, d.Text)
		}
		if len(msgs) > 0 && msgs[0].role == "system" {
			msgs = msgs[1:]
		}
		if len(msgs) == 0 || len(msgs)%2 != 0 {
			t.Fatalf("doc %d: got %d user/assistant messages, want a positive even number", i, len(msgs))
		}
		for j, m := range msgs {
			want := "user"
			if j%2 == 1 {
				want = "assistant"
			}
			if m.role != want {
				t.Fatalf("doc %d message %d: role %q, want %q", i, j, m.role, want)
			}
			if strings.TrimSpace(m.content) != m.content || m.content == "" {
				t.Fatalf("doc %d message %d: content %q is empty or has outer white space", i, j, m.content)
			}
		}
	}
	if chats == 0 || stories == 0 {
		t.Fatalf("got %d chats and %d stories, want both", chats, stories)
	}
}

var arithRE = regexp.MustCompile(`^(\d+) (plus|minus|times) (\d+) (?:is|equals) (\d+)\.$`)

func TestArithmeticAnswersAreRight(t *testing.T) {
	n := 0
	for i, d := range docs(t, gen(t, 2, 1_000_000)) {
		if d.Kind != "chat" {
			continue
		}
		msgs, err := parseChat(d.Text)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			g := arithRE.FindStringSubmatch(m.content)
			if m.role != "assistant" || g == nil {
				continue
			}
			a, _ := strconv.Atoi(g[1])
			b, _ := strconv.Atoi(g[3])
			c, _ := strconv.Atoi(g[4])
			want := map[string]int{"plus": a + b, "minus": a - b, "times": a * b}[g[2]]
			if c != want || c < 0 {
				t.Fatalf("doc %d: %q, want %d", i, m.content, want)
			}
			n++
		}
	}
	if n < 500 {
		t.Fatalf("checked %d arithmetic answers, want at least 500", n)
	}
}

// TestHeldOutQuestionsAreExcluded proves the filter works: with only the
// addition task, "What is 3 plus 4?" appears when nothing is excluded, and
// never when it is.
func TestHeldOutQuestionsAreExcluded(t *testing.T) {
	var add []task
	for _, tk := range tasks() {
		if tk.name == "add" {
			add = append(add, tk)
		}
	}
	const q = "What is 3 plus 4?"
	count := func(excluded map[string]bool) int {
		r := newRNG(5)
		n := 0
		for i := 0; i < 60_000; i++ {
			n += strings.Count(chat(r, add, add[0].weight, excluded), "user\n"+q+"<|im_end|>")
		}
		return n
	}
	if n := count(nil); n == 0 {
		t.Fatalf("without exclusion %q appeared 0 times; the test cannot show the filter works", q)
	}
	if n := count(map[string]bool{q: true}); n != 0 {
		t.Fatalf("with exclusion %q appeared %d times, want 0", q, n)
	}
	for i, d := range docs(t, gen(t, 1, 2_000_000)) {
		msgs, _ := parseChat(d.Text)
		for _, m := range msgs {
			if m.role == "user" && evalset.Prompts()[m.content] {
				t.Fatalf("doc %d: held-out question %q in the corpus", i, m.content)
			}
		}
	}
}

// TestHeldOutAnswersAreTaught checks that the corpus teaches the answer of
// every held-out question (asked in another phrasing), so the questions are
// in distribution.
func TestHeldOutAnswersAreTaught(t *testing.T) {
	answers := map[string]int{}
	for _, d := range docs(t, gen(t, 1, 6_000_000)) {
		msgs, _ := parseChat(d.Text)
		for _, m := range msgs {
			if m.role == "assistant" {
				answers[m.content]++
			}
		}
	}
	for _, q := range evalset.Questions() {
		t.Run(q.Prompt, func(t *testing.T) {
			if answers[q.Answer] == 0 {
				t.Fatalf("answer %q never appears in 6 MB of corpus", q.Answer)
			}
			if !q.Check(q.Answer) {
				t.Fatalf("Check(%q) = false for the question's own answer", q.Answer)
			}
		})
	}
}

func TestStoriesAreClean(t *testing.T) {
	r := newRNG(11)
	for i := 0; i < 3000; i++ {
		s := story(r, storySpec{})
		if strings.ContainsAny(s, "{}[]|") || strings.Contains(s, "  ") || strings.Contains(s, " .") {
			t.Fatalf("story %d has template residue or bad spacing: %q", i, s)
		}
		if last := s[len(s)-1]; last != '.' && last != '!' && last != '"' {
			t.Fatalf("story %d ends with %q: %q", i, last, s)
		}
		if n := len(strings.Fields(s)); n < 30 || n > 400 {
			t.Fatalf("story %d has %d words, want 30..400", i, n)
		}
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"name": "Lily", "he": "she"}
	tests := []struct {
		tmpl string
		want []string // every possible output
	}{
		{"plain text", []string{"plain text"}},
		{"{name} ran.", []string{"Lily ran."}},
		{"[a|b]", []string{"a", "b"}},
		{"x [very |]big", []string{"x very big", "x big"}},
		{"[one [two|three]|four]", []string{"one two", "one three", "four"}},
		{"{name} [and {he}|] , ok", []string{"Lily and she, ok", "Lily, ok"}},
	}
	for _, tc := range tests {
		t.Run(tc.tmpl, func(t *testing.T) {
			seen := map[string]bool{}
			r := newRNG(1)
			for i := 0; i < 200; i++ {
				got := expand(r, tc.tmpl, vars)
				ok := false
				for _, w := range tc.want {
					ok = ok || got == w
				}
				if !ok {
					t.Fatalf("expand(%q) = %q, want one of %q", tc.tmpl, got, tc.want)
				}
				seen[got] = true
			}
			if len(seen) != len(tc.want) {
				t.Fatalf("expand(%q) produced %d distinct outputs in 200 draws, want %d", tc.tmpl, len(seen), len(tc.want))
			}
		})
	}
}

func TestExpandUnknownVariablePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("expand with an unknown variable did not panic")
		}
	}()
	expand(newRNG(1), "{nope}", nil)
}

func TestEvalJSON(t *testing.T) {
	var b bytes.Buffer
	if err := run([]string{"-eval", "-"}, &b, io.Discard); err != nil {
		t.Fatal(err)
	}
	var items []evalItem
	if err := json.Unmarshal(b.Bytes(), &items); err != nil {
		t.Fatal(err)
	}
	if got, want := len(items), len(evalset.Questions()); got != want {
		t.Fatalf("got %d items, want %d", got, want)
	}
	for i, it := range items {
		q := evalset.Questions()[i]
		if it.Prompt != q.Prompt || it.Want != q.Want || it.Match != q.Match.String() {
			t.Fatalf("item %d = %+v, want the fields of %+v", i, it, q)
		}
	}
}
