package main

import (
	"strings"
)

// expand renders a template of the corpus grammar:
//
//   - "[a|b|c]" picks one alternative at random; alternatives may nest and
//     may be empty ("[very |]").
//   - "{name}" is replaced by vars["name"]; an unknown name is a bug in the
//     grammar and panics, which the tests catch (templates are constants of
//     this program, never input).
//
// Doubled spaces left by empty alternatives are collapsed.
func expand(r *rng, t string, vars map[string]string) string {
	var b strings.Builder
	expandInto(r, &b, t, vars)
	s := b.String()
	for strings.Contains(s, "  ") {
		s = strings.ReplaceAll(s, "  ", " ")
	}
	return strings.TrimSpace(strings.ReplaceAll(s, " ,", ","))
}

func expandInto(r *rng, b *strings.Builder, t string, vars map[string]string) {
	for i := 0; i < len(t); {
		switch t[i] {
		case '[':
			end := matching(t, i)
			alts := splitTop(t[i+1 : end])
			expandInto(r, b, pick(r, alts), vars)
			i = end + 1
		case '{':
			end := strings.IndexByte(t[i:], '}')
			if end < 0 {
				panic("corpusgen: unclosed { in template " + t)
			}
			name := t[i+1 : i+end]
			v, ok := vars[name]
			if !ok {
				panic("corpusgen: unknown variable {" + name + "} in template " + t)
			}
			b.WriteString(v)
			i += end + 1
		default:
			b.WriteByte(t[i])
			i++
		}
	}
}

// matching returns the index of the ']' that closes the '[' at t[i].
func matching(t string, i int) int {
	depth := 0
	for j := i; j < len(t); j++ {
		switch t[j] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	panic("corpusgen: unclosed [ in template " + t)
}

// splitTop splits s at the '|' characters that are not inside brackets.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for j := 0; j < len(s); j++ {
		switch s[j] {
		case '[':
			depth++
		case ']':
			depth--
		case '|':
			if depth == 0 {
				out = append(out, s[start:j])
				start = j + 1
			}
		}
	}
	return append(out, s[start:])
}

// capFirst upper-cases the first letter of s.
func capFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// article returns "a" or "an" for the noun phrase s.
func article(s string) string {
	if s != "" && strings.ContainsRune("aeiouAEIOU", rune(s[0])) {
		return "an"
	}
	return "a"
}
