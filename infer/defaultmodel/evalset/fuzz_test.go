package evalset

import (
	"encoding/json"
	"testing"
)

// FuzzCheck grades arbitrary replies: Check must never panic, and a reply
// that ends with a question's own answer is always graded correct, whatever
// comes before it.
func FuzzCheck(f *testing.F) {
	f.Add("3 plus 4 is 7.")
	f.Add("")
	f.Add("0000 -- c-a-t 19, 20,   21 \u00e9\xff")
	f.Fuzz(func(t *testing.T, reply string) {
		for _, q := range questions {
			q.Check(reply)
			if !q.Check(reply + " " + q.Answer) {
				t.Fatalf("%q: Check(%q) = false for a reply ending with the answer", q.Prompt, reply+" "+q.Answer)
			}
		}
	})
}

// FuzzParseToolCall parses arbitrary replies: ParseToolCall must never
// panic, a call it returns must have object arguments, and a reply that
// begins with a request's wanted call always passes that request's Check.
func FuzzParseToolCall(f *testing.F) {
	f.Add("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 7, \"b\": 8}}\n</tool_call>")
	f.Add("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": </tool_call>")
	f.Add("")
	f.Fuzz(func(t *testing.T, reply string) {
		if c, err := ParseToolCall(reply); err == nil {
			var m map[string]any
			if json.Unmarshal(c.Arguments, &m) != nil {
				t.Fatalf("ParseToolCall(%q) returned arguments %q that are not an object", reply, c.Arguments)
			}
		}
		for _, q := range toolRequests {
			q.Check(reply)
			good := "<tool_call>\n{\"name\": \"" + q.Name + "\", \"arguments\": " + q.Arguments + "}\n</tool_call>"
			if !q.Check(good + reply) {
				t.Fatalf("%q: Check = false for a reply that starts with the wanted call", q.Prompt)
			}
		}
	})
}
