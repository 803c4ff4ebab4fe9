package grammar

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAndMatch(t *testing.T) {
	for _, c := range []struct {
		name, src string
		yes, no   []string
	}{
		{"literal", `root ::= "abc"`, []string{"abc"}, []string{"", "ab", "abcd", "abd"}},
		{"alternation", `root ::= "a" | "bc" | ""`, []string{"a", "bc", ""}, []string{"b", "abc"}},
		{"class", `root ::= [a-c0-9_]`, []string{"a", "c", "5", "_"}, []string{"d", "", "ab"}},
		{"negated class", `root ::= [^a-c"]`, []string{"d", "é", "\n"}, []string{"a", `"`, ""}},
		{"any", `root ::= . .`, []string{"ab", "é€"}, []string{"a", "abc"}},
		{"star", `root ::= "x"*`, []string{"", "x", "xxxx"}, []string{"y", "xy"}},
		{"plus", `root ::= "ab"+`, []string{"ab", "abab"}, []string{"", "a", "aba"}},
		{"optional", `root ::= "a" "b"? "c"`, []string{"ac", "abc"}, []string{"abbc", "a"}},
		{"exact", `root ::= [0-9]{3}`, []string{"123"}, []string{"12", "1234"}},
		{"range", `root ::= [0-9]{2,4}`, []string{"12", "123", "1234"}, []string{"1", "12345"}},
		{"at least", `root ::= "a"{2,}`, []string{"aa", "aaaaa"}, []string{"a", ""}},
		{"group", `root ::= ("a" | "b" "c")+ "!"`, []string{"a!", "bca!", "abcbc!"}, []string{"!", "b!", "ab!"}},
		{"rules and recursion", "root ::= list\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= [0-9] | list",
			[]string{"[]", "[1]", "[1,[2,[]],3]"}, []string{"[", "[1,]", "[[]"}},
		{"escapes", `root ::= "\x41\u00e9\n\t\"\\" [\]\-\^]`, []string{"Aé\n\t\"\\]", "Aé\n\t\"\\-", "Aé\n\t\"\\^"}, []string{"Aé\n\t\"\\a"}},
		{"comments and newlines", "# a comment\nroot ::=\n  \"a\" # trailing\n  | \"b\"\n\n", []string{"a", "b"}, []string{"ab", ""}},
		{"multibyte", `root ::= [α-ω]+ "€"`, []string{"αβ€", "ω€"}, []string{"a€", "αβ"}},
		{"nullable prefix", "root ::= a b\na ::= \"x\"?\nb ::= a \"y\"", []string{"y", "xy", "xxy"}, []string{"x", "xxxy"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := Parse(c.src)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for _, s := range c.yes {
				if ok, err := g.Match(s); err != nil || !ok {
					t.Errorf("Match(%q) = %v, %v; want true", s, ok, err)
				}
			}
			for _, s := range c.no {
				if ok, err := g.Match(s); err != nil || ok {
					t.Errorf("Match(%q) = %v, %v; want false", s, ok, err)
				}
			}
			// String round-trips to a grammar of the same language.
			g2, err := Parse(g.String())
			if err != nil {
				t.Fatalf("Parse(String()) = %v for\n%s", err, g.String())
			}
			for _, s := range append(append([]string(nil), c.yes...), c.no...) {
				a, _ := g.Match(s)
				b, _ := g2.Match(s)
				if a != b {
					t.Errorf("%q: original matches %v, reparsed %v", s, a, b)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      error
	}{
		{"empty", "", ErrSyntax},
		{"no root", `a ::= "x"`, ErrInvalid},
		{"undefined", `root ::= a`, ErrInvalid},
		{"twice", "root ::= \"a\"\nroot ::= \"b\"", ErrSyntax},
		{"left recursion", `root ::= root "a" | "b"`, ErrInvalid},
		{"hidden left recursion", "root ::= a root \"x\" | \"y\"\na ::= \"z\"?", ErrInvalid},
		{"unterminated literal", `root ::= "abc`, ErrSyntax},
		{"unterminated class", `root ::= [abc`, ErrSyntax},
		{"empty class", `root ::= []`, ErrSyntax},
		{"backwards range", `root ::= [z-a]`, ErrSyntax},
		{"bad escape", `root ::= "\q"`, ErrSyntax},
		{"bad hex", `root ::= "\xZZ"`, ErrSyntax},
		{"unclosed group", `root ::= ("a"`, ErrSyntax},
		{"bad repetition", `root ::= "a"{3,1}`, ErrSyntax},
		{"huge repetition", `root ::= "a"{100000}`, ErrSyntax},
		{"missing ::=", `root "a"`, ErrSyntax},
		{"two rules on a line", `root ::= "a" b ::= "c"`, ErrSyntax},
		{"bad token", `root ::= <[12`, ErrSyntax},
		{"too large", "root ::= " + strings.Repeat(`"a"{4000} `, 70), ErrSyntax},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.src)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want an error wrapping %v", err, c.want)
			}
		})
	}
}
