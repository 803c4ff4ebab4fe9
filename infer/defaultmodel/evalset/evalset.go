package evalset

import (
	"strings"
	"unicode"
)

// Match says how a reply is graded against a Question's Want.
type Match int

const (
	// MatchNumber accepts a reply whose last number (a run of ASCII digits)
	// equals Want.
	MatchNumber Match = iota + 1
	// MatchWord accepts a reply that contains Want as a whole word, ignoring
	// case.
	MatchWord
	// MatchText accepts a reply that contains Want verbatim once runs of white
	// space in the reply are collapsed to one space.
	MatchText
)

// String returns the name of m as used in the JSON form of the set.
func (m Match) String() string {
	switch m {
	case MatchNumber:
		return "number"
	case MatchWord:
		return "word"
	case MatchText:
		return "text"
	}
	return "unknown"
}

// Question is one held-out question with its expected answer.
type Question struct {
	// Kind names the skill the question tests ("add", "capital", ...).
	Kind string
	// Prompt is the complete user message, sent as the only message of a
	// conversation with no system prompt.
	Prompt string
	// Want is the fact a correct reply must state, graded by Match.
	Want string
	// Match says how Want is compared with the reply.
	Match Match
	// Answer is the reply the training corpus teaches for this question, for
	// reports; a reply need not equal it to be correct.
	Answer string
}

// Check reports whether reply answers q correctly (see the package
// documentation for the rules of each Match).
func (q Question) Check(reply string) bool {
	switch q.Match {
	case MatchNumber:
		nums := numbers(reply)
		return len(nums) > 0 && nums[len(nums)-1] == q.Want
	case MatchWord:
		want := strings.ToLower(q.Want)
		for _, w := range words(reply) {
			if strings.ToLower(w) == want {
				return true
			}
		}
		return false
	case MatchText:
		return strings.Contains(strings.Join(strings.Fields(reply), " "), q.Want)
	}
	return false
}

// numbers returns the runs of ASCII digits in s, in order, without leading
// zeros (a lone "0" stays "0").
func numbers(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		if s[i] < '0' || s[i] > '9' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		n := strings.TrimLeft(s[i:j], "0")
		if n == "" {
			n = "0"
		}
		out = append(out, n)
		i = j
	}
	return out
}

// words splits s into maximal runs of letters, digits and hyphens, so that
// "c-a-t" and "New" are words and punctuation never is.
func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-'
	})
}

// Questions returns the held-out questions, in a fixed order. Each call
// returns a fresh slice that the caller may modify.
func Questions() []Question {
	return append([]Question(nil), questions...)
}

// Prompts returns the set of every Question's Prompt, the strings the corpus
// generator must never emit as a user message.
func Prompts() map[string]bool {
	m := make(map[string]bool, len(questions))
	for _, q := range questions {
		m[q.Prompt] = true
	}
	return m
}

var questions = []Question{
	{Kind: "add", Prompt: "What is 3 plus 4?", Want: "7", Match: MatchNumber, Answer: "3 plus 4 is 7."},
	{Kind: "add", Prompt: "What is 12 plus 5?", Want: "17", Match: MatchNumber, Answer: "12 plus 5 is 17."},
	{Kind: "add", Prompt: "What is 8 + 6?", Want: "14", Match: MatchNumber, Answer: "8 plus 6 is 14."},
	{Kind: "add", Prompt: "Can you add 11 and 9?", Want: "20", Match: MatchNumber, Answer: "11 plus 9 is 20."},
	{Kind: "sub", Prompt: "What is 9 minus 4?", Want: "5", Match: MatchNumber, Answer: "9 minus 4 is 5."},
	{Kind: "sub", Prompt: "What is 15 minus 7?", Want: "8", Match: MatchNumber, Answer: "15 minus 7 is 8."},
	{Kind: "sub", Prompt: "What is 10 minus 10?", Want: "0", Match: MatchNumber, Answer: "10 minus 10 is 0."},
	{Kind: "mul", Prompt: "What is 6 times 7?", Want: "42", Match: MatchNumber, Answer: "6 times 7 is 42."},
	{Kind: "mul", Prompt: "What is 4 times 5?", Want: "20", Match: MatchNumber, Answer: "4 times 5 is 20."},
	{Kind: "mul", Prompt: "What is 2 times 9?", Want: "18", Match: MatchNumber, Answer: "2 times 9 is 18."},
	{Kind: "capital", Prompt: "What is the capital of France?", Want: "Paris", Match: MatchWord, Answer: "The capital of France is Paris."},
	{Kind: "capital", Prompt: "What is the capital of Japan?", Want: "Tokyo", Match: MatchWord, Answer: "The capital of Japan is Tokyo."},
	{Kind: "capital", Prompt: "What is the capital of Italy?", Want: "Rome", Match: MatchWord, Answer: "The capital of Italy is Rome."},
	{Kind: "colour", Prompt: "What colour is the sky?", Want: "blue", Match: MatchWord, Answer: "The sky is blue."},
	{Kind: "colour", Prompt: "What color is grass?", Want: "green", Match: MatchWord, Answer: "Grass is green."},
	{Kind: "colour", Prompt: "What colour is a banana?", Want: "yellow", Match: MatchWord, Answer: "A banana is yellow."},
	{Kind: "sound", Prompt: "What sound does a cow make?", Want: "moo", Match: MatchWord, Answer: "A cow says moo."},
	{Kind: "sound", Prompt: "What does a duck say?", Want: "quack", Match: MatchWord, Answer: "A duck says quack."},
	{Kind: "legs", Prompt: "How many legs does a spider have?", Want: "8", Match: MatchNumber, Answer: "A spider has 8 legs."},
	{Kind: "legs", Prompt: "How many legs does a dog have?", Want: "4", Match: MatchNumber, Answer: "A dog has 4 legs."},
	{Kind: "legs", Prompt: "How many legs does a bird have?", Want: "2", Match: MatchNumber, Answer: "A bird has 2 legs."},
	{Kind: "day", Prompt: "What day comes after Monday?", Want: "Tuesday", Match: MatchWord, Answer: "The day after Monday is Tuesday."},
	{Kind: "day", Prompt: "What day comes before Saturday?", Want: "Friday", Match: MatchWord, Answer: "The day before Saturday is Friday."},
	{Kind: "month", Prompt: "What month comes after March?", Want: "April", Match: MatchWord, Answer: "The month after March is April."},
	{Kind: "week", Prompt: "How many days are in a week?", Want: "7", Match: MatchNumber, Answer: "There are 7 days in a week."},
	{Kind: "spell", Prompt: "How do you spell cat?", Want: "c-a-t", Match: MatchText, Answer: "The word cat is spelled c-a-t."},
	{Kind: "spell", Prompt: "How do you spell house?", Want: "h-o-u-s-e", Match: MatchText, Answer: "The word house is spelled h-o-u-s-e."},
	{Kind: "count", Prompt: "Count from 3 to 7.", Want: "3, 4, 5, 6, 7", Match: MatchText, Answer: "3, 4, 5, 6, 7."},
	{Kind: "next", Prompt: "What number comes after 19?", Want: "20", Match: MatchNumber, Answer: "The number after 19 is 20."},
	{Kind: "name", Prompt: "What is your name?", Want: "Muser", Match: MatchWord, Answer: "My name is Muser."},
}
