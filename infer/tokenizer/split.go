package tokenizer

// This file holds the splitters that pre-tokenizers are built from. A
// splitter cuts one fragment of code points into consecutive pieces and
// appends each piece's length to out; the lengths always sum to len(c).
// Positions past the end of the fragment are "out of range": they belong
// to no class, which is how both llama.cpp's hand-written splitters and
// its std::regex fallback (run on one fragment at a time) see them.
//
// Two kinds exist, matching the two paths in llama.cpp's
// unicode_regex_split:
//
//   - Hand-written splitters (splitGPT2, llama3Style) mirror llama.cpp's
//     own fast paths for the GPT-2, Llama 3, Qwen 2 and Qwen 3.5 regexes,
//     quirks included. They give every code point to some piece.
//   - Regex splitters (splitRegex with a matcher) reproduce std::regex's
//     ECMAScript semantics (leftmost match, first alternative that
//     succeeds, greedy quantifiers with backtracking) for one regex. Text
//     between matches becomes a piece of its own, as in llama.cpp.
//
// Unicode classes are those of unicode.go. In the std::regex path llama.cpp
// first "collapses" every non-ASCII code point to one byte standing for its
// class (white space to U+000B); a class test on a code point here is the
// same test on its collapsed byte. Regexes that contain no \p{..} class run
// on the code points themselves, with non-ASCII white space replaced by
// U+000B: wide maps a code point to what such a regex sees.

type splitter func(c []rune, out []int) []int

// at returns c[i], or -1 when i is out of range.
func at(c []rune, i int) rune {
	if i < len(c) {
		return c[i]
	}
	return -1
}

// in reports whether c[i] exists and satisfies class.
func in(c []rune, i int, class func(rune) bool) bool {
	return i < len(c) && class(c[i])
}

// run returns the end of the run of class starting at i.
func run(c []rune, i int, class func(rune) bool) int {
	for i < len(c) && class(c[i]) {
		i++
	}
	return i
}

// wide maps a code point to what llama.cpp's std::wregex path matches
// against: non-ASCII white space becomes U+000B.
func wide(c rune) rune {
	if c > 0x7F && isSpace(c) {
		return 0x0B
	}
	return c
}

// The class tests of the collapsed text are the Unicode ones: for ASCII,
// the fixed sets llama.cpp substitutes for \p{..} (A-Za-z, 0-9, ...) agree
// with the Unicode categories, and no white-space code point (which the
// collapse turns into U+000B) is a letter, number, punctuation or symbol.

// notSLN is [^\s\p{L}\p{N}].
func notSLN(c rune) bool { return !isSpace(c) && !isLetter(c) && !isNumber(c) }

// notCRLFLN is [^\r\n\p{L}\p{N}].
func notCRLFLN(c rune) bool { return c != '\r' && c != '\n' && !isLetter(c) && !isNumber(c) }

func isCRLF(c rune) bool { return c == '\r' || c == '\n' }

// splitRegex cuts c at every leftmost, non-overlapping match of match,
// which returns the length of the match starting at p, or 0 for none
// (none of the regexes used here can match the empty string).
func splitRegex(c []rune, out []int, match func(c []rune, p int) int) []int {
	gap := 0
	for p := 0; p < len(c); {
		n := match(c, p)
		if n == 0 {
			p++
			continue
		}
		if p > gap {
			out = append(out, p-gap)
		}
		out = append(out, n)
		p += n
		gap = p
	}
	if gap < len(c) {
		out = append(out, len(c)-gap)
	}
	return out
}

// regex returns a splitter for a matcher.
func regex(match func(c []rune, p int) int) splitter {
	return func(c []rune, out []int) []int { return splitRegex(c, out, match) }
}

// runOf returns a matcher for class+ .
func runOf(class func(rune) bool) func(c []rune, p int) int {
	return func(c []rune, p int) int { return run(c, p, class) - p }
}

// oneOf returns a matcher for a single code point of class.
func oneOf(class func(rune) bool) func(c []rune, p int) int {
	return func(c []rune, p int) int {
		if class(c[p]) {
			return 1
		}
		return 0
	}
}

// upTo returns a matcher for class{1,max}.
func upTo(class func(rune) bool, max int) func(c []rune, p int) int {
	return func(c []rune, p int) int {
		n := 0
		for n < max && p+n < len(c) && class(c[p+n]) {
			n++
		}
		return n
	}
}

// spaceThen returns a matcher for \s?class+ (a regex with its own \s,
// which is white space in both regex paths).
func spaceThen(class func(rune) bool) func(c []rune, p int) int {
	return func(c []rune, p int) int {
		if isSpace(c[p]) && in(c, p+1, class) {
			return run(c, p+1, class) - p
		}
		return run(c, p, class) - p
	}
}

// splitTrailingSpace splits off the white space that ends a fragment:
// the pieces std::regex gives for \s+$ (the one match is the trailing
// white-space run; what precedes it is a gap).
func splitTrailingSpace(c []rune, out []int) []int {
	q := len(c)
	for q > 0 && isSpace(c[q-1]) {
		q--
	}
	if q > 0 {
		out = append(out, q)
	}
	if q < len(c) {
		out = append(out, len(c)-q)
	}
	return out
}

// threeDigits matches [0-9][0-9][0-9].
func threeDigits(c []rune, p int) int {
	for i := 0; i < 3; i++ {
		if r := at(c, p+i); r < '0' || r > '9' {
			return 0
		}
	}
	return 3
}

// contraction returns the length of the contraction at p: 's 't 're 've
// 'm 'll 'd, in either case when fold is set, or 0.
func contraction(c []rune, p int, fold bool) int {
	if at(c, p) != '\'' || p+1 >= len(c) {
		return 0
	}
	lower := func(r rune) rune {
		if fold && r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	switch lower(c[p+1]) {
	case 's', 't', 'm', 'd':
		return 2
	}
	if p+2 < len(c) {
		a, b := lower(c[p+1]), lower(c[p+2])
		if a == 'r' && b == 'e' || a == 'v' && b == 'e' || a == 'l' && b == 'l' {
			return 3
		}
	}
	return 0
}

// spaceRun matches the white-space alternatives that end the GPT-2 and
// Llama 3 style regexes: \s*[\r\n]+ (when crlf is set), \s+(?!\S), \s+.
func spaceRun(c []rune, p int, crlf bool) int {
	q := p
	last := -1
	for q < len(c) && isSpace(c[q]) {
		if c[q] == '\r' || c[q] == '\n' {
			last = q
		}
		q++
	}
	switch {
	case crlf && last >= 0:
		return last + 1 - p
	case q-p > 1 && q < len(c):
		return q - 1 - p
	}
	return q - p
}

// splitGPT2 is llama.cpp's hand-written splitter for the GPT-2 regex
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(c []rune, out []int) []int {
	for p := 0; p < len(c); {
		n := gpt2At(c, p)
		out = append(out, n)
		p += n
	}
	return out
}

func gpt2At(c []rune, p int) int {
	if n := contraction(c, p, false); n > 0 {
		return n
	}
	q := p
	if c[p] == ' ' {
		q++
	}
	for _, class := range [...]func(rune) bool{isLetter, isNumber, notSLN} {
		if in(c, q, class) {
			return run(c, q, class) - p
		}
	}
	if n := spaceRun(c, p, false); n > 0 {
		return n
	}
	return 1
}

// llama3Style describes the family of regexes of the form
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// that Llama 3 (D=3), Qwen 2 (D=1) and their relatives use.
type llama3Style struct {
	digits    int  // D: most digits in one piece; 0 means unlimited
	marks     bool // letters runs are [\p{L}\p{M}]+ and punctuation excludes \p{M} (Qwen 3.5)
	punctCRLF bool // the punctuation alternative takes trailing [\r\n]*
}

func (s llama3Style) split(c []rune, out []int) []int {
	for p := 0; p < len(c); {
		n := s.at(c, p)
		out = append(out, n)
		p += n
	}
	return out
}

func (s llama3Style) at(c []rune, p int) int {
	if n := contraction(c, p, true); n > 0 {
		return n
	}
	letter := isLetter
	if s.marks {
		letter = func(r rune) bool { k := classOf(r); return k == cLetter || k == cMark }
	}
	cp := c[p]
	if !isCRLF(cp) && !isNumber(cp) && (letter(cp) || in(c, p+1, letter)) {
		return run(c, p+1, letter) - p
	}
	if isNumber(cp) {
		end := run(c, p, isNumber)
		if s.digits > 0 && end-p > s.digits {
			return s.digits
		}
		return end - p
	}
	punct := func(r rune) bool { return !isSpace(r) && !letter(r) && !isNumber(r) }
	q := p
	if cp == ' ' {
		q++
	}
	if q < len(c) && punct(c[q]) || q == len(c) && q > p {
		// The q == len(c) case is llama.cpp's hand-written splitter taking
		// a lone trailing space here; \s+ would give the same piece.
		e := run(c, q, punct)
		if s.punctCRLF {
			e = run(c, e, isCRLF)
		}
		return e - p
	}
	if n := spaceRun(c, p, true); n > 0 {
		return n
	}
	return 1
}

// casedWords is the family of regexes GPT-4o (Llama 4) and Tekken use:
//
//	[^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// where llama.cpp writes U as ((?=[\p{L}])([^a-z])) — a letter that is not
// a-z — and W as ((?=[\p{L}])([^A-Z])) — a letter that is not A-Z — and C
// is the optional contraction (GPT-4o) or nothing (Tekken). Every non-ASCII
// letter is in both U and W.
type casedWords struct {
	digits       int
	contractions bool
}

func isU(r rune) bool { return isLetter(r) && !(r >= 'a' && r <= 'z') }
func isW(r rune) bool { return isLetter(r) && !(r >= 'A' && r <= 'Z') }

func (s casedWords) split(c []rune, out []int) []int {
	return splitRegex(c, out, s.match)
}

// words matches U*W+ (first) or U+W* (second) at p, with std::regex's
// backtracking, and returns the end, or -1.
func wordsAt(c []rune, p int, first bool) int {
	k := run(c, p, isU)
	if !first {
		if k == p {
			return -1
		}
		return run(c, k, isW)
	}
	// U* takes [p,k); W+ must then match. Backtracking U* hands back one
	// code point at a time until W+ can start.
	if in(c, k, isW) {
		return run(c, k, isW)
	}
	for j := k - 1; j >= p; j-- {
		if isW(c[j]) {
			return run(c, j, isW)
		}
	}
	return -1
}

func (s casedWords) match(c []rune, p int) int {
	for _, first := range [...]bool{true, false} {
		end := -1
		if notCRLFLN(c[p]) {
			end = wordsAt(c, p+1, first)
		}
		if end < 0 {
			end = wordsAt(c, p, first)
		}
		if end >= 0 {
			if s.contractions {
				end += contraction(c, end, true)
			}
			return end - p
		}
	}
	if isNumber(c[p]) {
		return upTo(isNumber, s.digits)(c, p)
	}
	q := p
	if c[p] == ' ' && in(c, p+1, notSLN) {
		q++
	}
	if in(c, q, notSLN) {
		e := run(c, q, notSLN)
		return run(c, e, func(r rune) bool { return isCRLF(r) || r == '/' }) - p
	}
	return spaceRun(c, p, true)
}

// newlineRuns is llama.cpp's splitter for [^\n]+|[\n]+ .
func newlineRuns(c []rune, out []int) []int {
	for p := 0; p < len(c); {
		nl := c[p] == '\n'
		q := run(c, p, func(r rune) bool { return (r == '\n') == nl })
		out = append(out, q-p)
		p = q
	}
	return out
}
