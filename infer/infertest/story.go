package infertest

import "strings"

// storyWords is the vocabulary of Story: common words of the TinyStories
// corpus, so that stories260K and the embedded default model tokenize
// them into about one token each.
var storyWords = strings.Fields("once upon a time there was a little girl named lily she liked to play with her ball in the park " +
	"one day she saw a big dog the dog was happy and wanted to play too they ran and laughed all day long")

// Story returns a prompt of n words of story-like text, the same for the
// same seed and n; different seeds give different word orders. Tests use
// it for prompts longer than a KV block (with stories260K, n ≥ 60 words
// fill a 64-token block).
func Story(seed, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(storyWords[(i*7+seed+i/len(storyWords))%len(storyWords)])
	}
	return b.String()
}
