package evalset

import "testing"

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
