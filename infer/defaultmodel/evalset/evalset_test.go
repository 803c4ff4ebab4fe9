package evalset

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	num := Question{Prompt: "What is 3 plus 4?", Want: "7", Match: MatchNumber}
	zero := Question{Prompt: "What is 10 minus 10?", Want: "0", Match: MatchNumber}
	word := Question{Prompt: "What is the capital of France?", Want: "Paris", Match: MatchWord}
	spell := Question{Prompt: "How do you spell cat?", Want: "c-a-t", Match: MatchText}
	count := Question{Prompt: "Count from 3 to 7.", Want: "3, 4, 5, 6, 7", Match: MatchText}
	tests := []struct {
		q     Question
		reply string
		want  bool
	}{
		{num, "3 plus 4 is 7.", true},
		{num, "The answer is 7", true},
		{num, "3 plus 4 is 8.", false},
		{num, "7 is not it, 3 plus 4 is 17.", false},
		{num, "3 plus 4 is 07.", true},
		{num, "", false},
		{num, "seven", false},
		{zero, "10 minus 10 is 0.", true},
		{zero, "10 minus 10 is 00.", true},
		{zero, "10 minus 10 is 10.", false},
		{word, "The capital of France is Paris.", true},
		{word, "paris", true},
		{word, "The capital of France is Parisian.", false},
		{word, "The capital of France is Rome.", false},
		{spell, "The word cat is spelled c-a-t.", true},
		{spell, "The word cat is spelled c-a-r.", false},
		{count, "3, 4, 5, 6, 7.", true},
		{count, "3,  4, 5,\n6, 7.", true},
		{count, "3, 4,  5, 6, 7", true},
		{count, "3, 4, 5, 7.", false},
		{Question{Want: "x", Match: 0}, "x", false},
	}
	for _, tc := range tests {
		t.Run(tc.q.Prompt+"/"+tc.reply, func(t *testing.T) {
			if got := tc.q.Check(tc.reply); got != tc.want {
				t.Fatalf("Check(%q) for want %q = %v, want %v", tc.reply, tc.q.Want, got, tc.want)
			}
		})
	}
}

func TestQuestionsAreWellFormed(t *testing.T) {
	qs := Questions()
	if len(qs) < 20 {
		t.Fatalf("got %d questions, want at least 20", len(qs))
	}
	seen := map[string]bool{}
	kinds := map[string]bool{}
	for _, q := range qs {
		if seen[q.Prompt] {
			t.Fatalf("duplicate prompt %q", q.Prompt)
		}
		seen[q.Prompt] = true
		kinds[q.Kind] = true
		if q.Prompt == "" || q.Want == "" || q.Answer == "" || q.Kind == "" {
			t.Fatalf("question %+v has an empty field", q)
		}
		if strings.ContainsAny(q.Prompt, "<>\n") {
			t.Fatalf("prompt %q contains markup or a newline", q.Prompt)
		}
		if !q.Check(q.Answer) {
			t.Fatalf("Check(%q) = false for the question's own answer (want %q, %v)", q.Answer, q.Want, q.Match)
		}
	}
	if len(kinds) < 10 {
		t.Fatalf("got %d kinds of question, want at least 10", len(kinds))
	}
	if got := len(Prompts()); got != len(qs) {
		t.Fatalf("Prompts() has %d entries, want %d", got, len(qs))
	}
	qs[0].Prompt = "changed"
	if Questions()[0].Prompt == "changed" {
		t.Fatal("Questions returned the package's own slice")
	}
}

func TestMatchString(t *testing.T) {
	for m, want := range map[Match]string{MatchNumber: "number", MatchWord: "word", MatchText: "text", 0: "unknown"} {
		if got := m.String(); got != want {
			t.Fatalf("Match(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}
