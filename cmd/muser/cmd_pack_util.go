package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// openStore opens the store under --home for a pack or receipts command.
// Commands that only read open it read-only (a shared lock); every
// command but import needs the store to exist already.
func openStore(env *cliEnv, readOnly, create bool) (*store.Store, error) {
	return store.Open(env.home, store.Options{ReadOnly: readOnly, MustExist: !create})
}

// checkPackRefs checks that every ref is a pack ID or a prefix of one: 1
// to 64 hex digits. A ref that is not is a usage error of cmd naming it.
// Every command that takes pack IDs checks them so, before it opens the
// store, the tier or a connection.
func checkPackRefs(cmd *command, refs []string) error {
	for _, r := range refs {
		if len(r) == 0 || len(r) > 64 || strings.Trim(strings.ToLower(r), "0123456789abcdef") != "" {
			return usagef(cmd, "pack ID %q: want 1 to 64 hex digits", r)
		}
	}
	return nil
}

// resolvePacks turns ID prefixes into pack IDs; the first that is unknown
// or ambiguous is the error.
func resolvePacks(s *store.Store, args []string) ([]pack.Digest, error) {
	ids := make([]pack.Digest, 0, len(args))
	for _, a := range args {
		id, err := s.ResolvePack(a)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// formatBytes prints a byte count in binary units ("768.0 KiB").
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		f /= unit
		if math.Abs(f) < unit {
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return fmt.Sprintf("%.1f EiB", f/unit)
}

// parseBytes parses a byte count: a number with an optional unit, B,
// k/K/KB (1000), KiB (1024), and the same for M, G, T. Case is ignored.
// A count of bytes must be whole; a fraction of a larger unit is rounded
// down to whole bytes.
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if num == "" {
		return 0, fmt.Errorf("byte count %q: want a number with an optional unit (B, KB, KiB, MB, MiB, GB, GiB, TB, TiB)", s)
	}
	mult := map[string]float64{"": 1, "b": 1,
		"k": 1e3, "kb": 1e3, "kib": 1 << 10, "ki": 1 << 10,
		"m": 1e6, "mb": 1e6, "mib": 1 << 20, "mi": 1 << 20,
		"g": 1e9, "gb": 1e9, "gib": 1 << 30, "gi": 1 << 30,
		"t": 1e12, "tb": 1e12, "tib": 1 << 40, "ti": 1 << 40}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("byte count %q: unknown unit %q", s, unit)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("byte count %q: %v", s, err)
	}
	if mult == 1 && f != math.Trunc(f) {
		return 0, fmt.Errorf("byte count %q is not a whole number of bytes", s)
	}
	v := f * mult
	if v >= math.MaxInt64 || math.IsNaN(v) {
		return 0, fmt.Errorf("byte count %q is too large", s)
	}
	return int64(v), nil
}

// formatTime prints a time in UTC to the second.
func formatTime(t time.Time) string {
	if t.IsZero() || t.UnixNano() == 0 {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// table writes aligned columns.
type table struct {
	rows [][]string
}

func (t *table) add(cols ...string) { t.rows = append(t.rows, cols) }

func (t *table) write(w io.Writer) {
	if len(t.rows) == 0 {
		return
	}
	widths := make([]int, len(t.rows[0]))
	for _, r := range t.rows {
		for i, c := range r {
			r[i] = printable(c)
			// fmt pads %-*s to a count of runes, not bytes.
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
		}
	}
	for _, r := range t.rows {
		var b strings.Builder
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
			} else {
				fmt.Fprintf(&b, "%-*s  ", widths[i], c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// printable returns s with every control character, bidirectional
// override and invalid UTF-8 byte written as a Go escape (\x1b, \n,
// \u202e), so that text recorded from a peer or a file (a receipt's
// detail) cannot move the terminal's cursor, change its colours or
// reorder a line when printed.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, escaped) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "\\x%02x", s[0])
		case escaped(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// printableLines is printable for each line of s, keeping its line breaks.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n")
}

// escaped reports whether printable writes r as an escape.
func escaped(r rune) bool {
	return unicode.IsControl(r) || r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069'
}

// shorten cuts s to at most n runes (n ≥ 4), ending a cut with "...".
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n-3]) + "..."
}
