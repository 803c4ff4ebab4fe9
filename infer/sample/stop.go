package sample

import "strings"

// Stop finds stop strings in streamed text. Feed it each decoded piece
// with Write; it returns the text that is safe to show. The zero value
// (no stop strings) passes everything through.
type Stop struct {
	stops   []string
	pending strings.Builder
	stopped bool
}

// NewStop returns a matcher for stops. Empty strings are ignored.
func NewStop(stops []string) *Stop {
	s := &Stop{}
	for _, x := range stops {
		if x != "" {
			s.stops = append(s.stops, x)
		}
	}
	return s
}

// Write adds piece to the text seen so far. It returns the text that can
// now be emitted and whether a stop string was found; after a stop, every
// later Write returns ("", true). The emitted text never includes a stop
// string or any part of one; a tail that may still grow into a stop string
// is held back.
func (s *Stop) Write(piece string) (string, bool) {
	if s.stopped {
		return "", true
	}
	if len(s.stops) == 0 {
		return piece, false
	}
	s.pending.WriteString(piece)
	text := s.pending.String()
	// The earliest complete match wins.
	cut := -1
	for _, x := range s.stops {
		if i := strings.Index(text, x); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		s.stopped = true
		s.pending.Reset()
		return text[:cut], true
	}
	// Hold back the longest tail that is a proper prefix of a stop string.
	hold := 0
	for _, x := range s.stops {
		for n := min(len(x)-1, len(text)); n > hold; n-- {
			if strings.HasSuffix(text, x[:n]) {
				hold = n
				break
			}
		}
	}
	out := text[:len(text)-hold]
	s.pending.Reset()
	s.pending.WriteString(text[len(text)-hold:])
	return out, false
}

// Flush returns the held-back text at the end of generation (when no stop
// string was found); it is part of the output.
func (s *Stop) Flush() string {
	if s.stopped {
		return ""
	}
	out := s.pending.String()
	s.pending.Reset()
	return out
}

// Stopped reports whether a stop string was found.
func (s *Stop) Stopped() bool { return s.stopped }
