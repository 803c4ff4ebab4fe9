package serve

import (
	"fmt"
	"strings"
	"unicode"
)

// maxAlias bounds an --alias.
const maxAlias = 256

// setAlias makes alias the model's id (the name every API reports),
// keeping its other names as ones a request may use. An alias must be
// printable, without spaces, at most maxAlias bytes.
func (lm *loadedModel) setAlias(alias string) error {
	if alias == "" {
		return nil
	}
	if len(alias) > maxAlias || strings.IndexFunc(alias, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return &OptionError{Option: "--alias", Reason: fmt.Sprintf("is %q; want a name of at most %d printable characters without spaces", alias, maxAlias)}
	}
	lm.id = alias
	lm.aliases[alias] = true
	if base, tag, ok := strings.Cut(alias, ":"); ok {
		if tag == "latest" {
			lm.aliases[base] = true
		}
	} else {
		lm.aliases[alias+":latest"] = true
	}
	return nil
}
