package tenant

import (
	"strings"
	"testing"
)

// FuzzParseKeys checks that ParseKeys never panics and that every key it
// accepts looks up to its tenant.
func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{
		keyA + " alice\n" + keyB + " bob\n",
		"# comment\n\n" + keyC + "\talice\n",
		keyA + " alice\n" + keyA + " bob\n",
		"short alice\n", keyA + "\n", "\x00\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		k, err := ParseKeys(strings.NewReader(text), "fuzz")
		if err != nil {
			return
		}
		for _, line := range strings.Split(text, "\n") {
			fields := strings.Fields(line)
			if len(fields) != 2 || strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if tn, ok := k.Lookup(fields[0]); !ok || tn != fields[1] {
				t.Fatalf("key %q: got (%q, %v), want (%q, true)", fields[0], tn, ok, fields[1])
			}
		}
	})
}
