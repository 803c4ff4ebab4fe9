package tokenizer

import (
	"fmt"
	"sort"
)

// preTokenizer is what a tokenizer.ggml.pre name selects for a BPE vocab:
// the splitters that cut text into words before merges run, and the flags
// llama.cpp sets along with them.
type preTokenizer struct {
	steps []splitter
	// ignoreMerges: a word that is itself a token is emitted whole.
	ignoreMerges bool
	// addBOS is the add-BOS default when the metadata has no
	// tokenizer.ggml.add_bos_token.
	addBOS bool
	// noClean turns off the clean-up of spaces before punctuation that
	// detokenizing otherwise applies to BPE vocabs.
	noClean bool
	// noBOS disables the default BOS id (ChatGLM).
	noBOS bool
	// rawUTF8: words are not byte-encoded GPT-2 style and whitespace is
	// escaped as U+2581, as SentencePiece does (Gemma 4).
	rawUTF8 bool
	// forceBOS: BOS is added whatever the metadata says (Gemma 4).
	forceBOS bool
	// newlineWords: a word of newlines only that is a token is emitted
	// whole (Gemma 4).
	newlineWords bool
}

// Splitters shared by several pre-tokenizers.
var (
	gpt2Steps      = []splitter{splitGPT2}
	llama3Steps    = []splitter{llama3Style{digits: 3, punctCRLF: true}.split}
	qwen2Steps     = []splitter{llama3Style{digits: 1, punctCRLF: true}.split}
	starcoderSteps = []splitter{regex(oneOf(isNumber)), splitGPT2}
	poroSteps      = []splitter{regex(poroWord)}
	ds3Steps       = []splitter{regex(upTo(isNumber, 3)), regex(runOf(isCJKKana)), regex(ds3Match)}
	gpt4oSteps     = []splitter{casedWords{digits: 3, contractions: true}.split}
)

// preTokenizers maps every tokenizer.ggml.pre name this package supports
// to its pre-tokenizer, with the flags llama.cpp's llama_vocab::load sets
// for that name. The empty name (no key) is the default pre-tokenizer.
var preTokenizers = map[string]preTokenizer{}

// unsupportedPre lists the names llama.cpp knows that this package does
// not implement yet; they fail with ErrUnsupportedPre rather than
// ErrUnknownPre.
var unsupportedPre = []string{
	"youtu", "exaone-moe", "chameleon", "granite-embed-multi-97m",
	"tiny_aya", "cohere2moe", "superbpe", "kimi-k2", "afmoe", "whitespace",
}

func init() {
	def := preTokenizer{steps: []splitter{
		regex(runOf(func(r rune) bool { return isPunct(r) || isASCIIIn(r, "$+<=>^~|") })),
		splitGPT2,
		regex(runOf(isNumber)),
		regex(threeDigits),
	}}
	add := func(p preTokenizer, names ...string) {
		for _, n := range names {
			preTokenizers[n] = p
		}
	}
	add(def, "", "default")
	add(preTokenizer{steps: []splitter{regex(upTo(isNumber, 3)), llama3Style{punctCRLF: true}.split}, ignoreMerges: true}, "minicpm5")
	add(preTokenizer{steps: llama3Steps, ignoreMerges: true, addBOS: true},
		"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano")
	add(preTokenizer{steps: []splitter{
		regex(oneOf(isCRLF)),
		regex(spaceThen(func(r rune) bool { return inRanges(wide(r), deepseekLetters) })),
		regex(spaceThen(func(r rune) bool { return inRanges(wide(r), deepseekPunct) })),
		splitTrailingSpace,
		regex(runOf(isCJK)),
		regex(runOf(isNumber)),
	}, noClean: true}, "deepseek-llm")
	add(preTokenizer{steps: []splitter{
		regex(oneOf(isCRLF)),
		regex(spaceThen(isLetter)),
		regex(spaceThen(isPunct)),
		regex(runOf(isCJK)),
		regex(oneOf(isNumber)),
	}, noClean: true}, "deepseek-coder")
	add(preTokenizer{steps: ds3Steps, noClean: true}, "deepseek-v3", "hunyuan-dense", "joyai-llm")
	add(preTokenizer{steps: []splitter{
		regex(runOf(func(r rune) bool { return isPunct(r) || isASCIIIn(r, "$+<=>^~|`") })),
		splitGPT2,
		regex(threeDigits),
	}}, "falcon")
	add(preTokenizer{steps: gpt2Steps},
		"mpt", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
		"a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe",
		"olmo", "jais", "exaone4")
	add(preTokenizer{steps: gpt2Steps, noClean: true}, "trillion", "granite-docling")
	add(preTokenizer{steps: starcoderSteps}, "starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2")
	add(preTokenizer{steps: starcoderSteps, noClean: true}, "command-r", "smollm")
	add(preTokenizer{steps: qwen2Steps, noClean: true},
		"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "grok-2", "solar-open",
		// bailingmoe's regex differs from Qwen 2's in spelling only: the
		// contractions are the same set and \s*[\r\n] ends where
		// \s*[\r\n]+ does.
		"bailingmoe", "bailingmoe2", "llada-moe")
	add(preTokenizer{steps: qwen2Steps}, "stablelm2", "megrez")
	add(preTokenizer{steps: []splitter{llama3Style{digits: 1, marks: true, punctCRLF: true}.split}, noClean: true}, "qwen35")
	add(preTokenizer{steps: []splitter{llama3Style{digits: 1}.split}, noClean: true}, "seed-coder")
	add(preTokenizer{steps: llama3Steps}, "dbrx", "smaug-bpe")
	add(preTokenizer{steps: llama3Steps, noBOS: true}, "glm4", "chatglm-bpe")
	add(preTokenizer{steps: poroSteps, noClean: true}, "poro-chat")
	add(preTokenizer{steps: poroSteps}, "bloom", "gpt3-finnish")
	add(preTokenizer{steps: []splitter{regex(poroWord), regex(oneOf(isNumber))}, noClean: true}, "viking")
	add(preTokenizer{steps: []splitter{casedWords{digits: 1}.split}, noClean: true, ignoreMerges: true, addBOS: true}, "tekken")
	add(preTokenizer{steps: gpt4oSteps, noClean: true}, "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2")
	add(preTokenizer{steps: []splitter{jais2Split}}, "jais-2")
	add(preTokenizer{steps: []splitter{newlineRuns, qwen2Steps[0]}, noClean: true}, "laguna")
	add(preTokenizer{steps: []splitter{newlineRuns}, rawUTF8: true, forceBOS: true, newlineWords: true}, "gemma4", "granite-embed-multi-311m")
	add(preTokenizer{steps: []splitter{newlineRuns}, rawUTF8: true, noClean: true}, "sarvam-moe")
}

// lookupPre returns the pre-tokenizer for a tokenizer.ggml.pre name.
func lookupPre(name string) (preTokenizer, error) {
	if p, ok := preTokenizers[name]; ok {
		return p, nil
	}
	for _, n := range unsupportedPre {
		if n == name {
			return preTokenizer{}, fmt.Errorf("%w: %q", ErrUnsupportedPre, name)
		}
	}
	return preTokenizer{}, fmt.Errorf("%w: %q", ErrUnknownPre, name)
}

// PreTokenizers returns the tokenizer.ggml.pre names this package
// implements, sorted. The empty name, meaning the key is absent, is not
// listed; it selects the same pre-tokenizer as "default".
func PreTokenizers() []string {
	var names []string
	for n := range preTokenizers {
		if n != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func isASCIIIn(r rune, set string) bool {
	if r >= 0x80 {
		return false
	}
	for i := 0; i < len(set); i++ {
		if rune(set[i]) == r {
			return true
		}
	}
	return false
}

type runeRange struct{ lo, hi rune }

func inRanges(r rune, t []runeRange) bool {
	i := sort.Search(len(t), func(i int) bool { return t[i].hi >= r })
	return i < len(t) && t[i].lo <= r
}

// isCJK is DeepSeek's [一-龥ࠀ-一가-퟿], seen through wide: U+4E00–U+9FA5,
// U+0800–U+4E00, U+AC00–U+D7FF.
func isCJK(r rune) bool {
	r = wide(r)
	return r >= 0x0800 && r <= 0x9FA5 || r >= 0xAC00 && r <= 0xD7FF
}

// isCJKKana is DeepSeek V3's [一-龥぀-ゟ゠-ヿ]: U+4E00–U+9FA5 and the
// Hiragana and Katakana blocks U+3040–U+30FF.
func isCJKKana(r rune) bool {
	return r >= 0x4E00 && r <= 0x9FA5 || r >= 0x3040 && r <= 0x30FF
}

// deepseekLetters is the letter class of DeepSeek LLM's second regex,
// \s?[A-Za-zµÀ-ÖØ-öø-ƺ…𞤀-𞥃]+ (cased letters of many scripts), as code
// point ranges.
var deepseekLetters = []runeRange{
	{0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
	{0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
	{0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
	{0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
	{0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
	{0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
	{0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
	{0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
	{0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
	{0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
	{0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
	{0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
	{0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
	{0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
	{0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
	{0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
	{0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
}

// deepseekPunct is the class of DeepSeek LLM's third regex,
// \s?[!-/:-~！-／：-～‘-‟　-。]+ .
var deepseekPunct = []runeRange{
	{0x21, 0x2F}, {0x3A, 0x7E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
}

// poroWord matches " ?[^(\s|.,!?…。，、।۔،)]+", the regex of Poro, BLOOM
// and GPT-3 Finnish: words are cut at white space and at these
// punctuation marks (and at the parentheses and bar the author meant as
// regex syntax but wrote inside the brackets).
func poroWord(c []rune, p int) int {
	word := func(r rune) bool {
		r = wide(r)
		if isSpace(r) {
			return false
		}
		switch r {
		case '(', '|', ')', '.', ',', '!', '?', 0x2026, 0x3002, 0xFF0C, 0x3001, 0x0964, 0x06D4, 0x060C:
			return false
		}
		return true
	}
	if c[p] == ' ' && in(c, p+1, word) {
		return run(c, p+1, word) - p
	}
	return run(c, p, word) - p
}

// ds3Match is the last regex of DeepSeek V3:
//
//	[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func ds3Match(c []rune, p int) int {
	asciiLetter := func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' }
	asciiPunct := func(r rune) bool { return r < 0x80 && (isPunct(r) || isSymbol(r)) }
	if asciiPunct(c[p]) && in(c, p+1, asciiLetter) {
		return run(c, p+1, asciiLetter) - p
	}
	lm := func(r rune) bool { return isLetter(r) || isMark(r) }
	opt := func(r rune) bool { return !isCRLF(r) && !isLetter(r) && !isPunct(r) && !isSymbol(r) }
	if opt(c[p]) && in(c, p+1, lm) {
		return run(c, p+1, lm) - p
	}
	if lm(c[p]) {
		return run(c, p, lm) - p
	}
	ps := func(r rune) bool { return isPunct(r) || isSymbol(r) }
	q := p
	if c[p] == ' ' && in(c, p+1, ps) {
		q++
	}
	if in(c, q, ps) {
		return run(c, run(c, q, ps), isCRLF) - p
	}
	return spaceRun(c, p, true)
}

// jais2Split is Jais 2's regex: Llama 3's, with the white-space runs that
// precede a word cut into pieces of 512, 256, ..., 4, then 2 or 1 code
// points:
//
//	...|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|...|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}
func jais2Split(c []rune, out []int) []int {
	// The white-space run around p, found once per run so that a long run
	// costs linear time: [wsStart, wsEnd), and the end of its last CR or
	// LF (or -1).
	wsStart, wsEnd, crlfEnd := -1, -1, -1
	return splitRegex(c, out, func(c []rune, p int) int {
		if n := jais2Word(c, p); n > 0 {
			return n
		}
		if !isSpace(c[p]) {
			return 0
		}
		if p < wsStart || p >= wsEnd {
			wsStart, wsEnd, crlfEnd = p, p, -1
			for wsEnd < len(c) && isSpace(c[wsEnd]) {
				if isCRLF(c[wsEnd]) {
					crlfEnd = wsEnd + 1
				}
				wsEnd++
			}
		}
		if crlfEnd > p {
			return crlfEnd - p // \s*[\r\n]+
		}
		n := wsEnd - p
		// \s{k}(?!\S) matches when k code points of white space are
		// followed by white space or by the end of the fragment.
		fits := func(k int) bool { return n > k || n == k && wsEnd == len(c) }
		for k := 512; k >= 4; k /= 2 {
			if fits(k) {
				return k
			}
		}
		if fits(2) {
			return 2
		}
		return 1
	})
}

// jais2Word matches the alternatives of Jais 2's regex before the white
// space ones (Llama 3's), or returns 0.
func jais2Word(c []rune, p int) int {
	if n := contraction(c, p, true); n > 0 {
		return n
	}
	if notCRLFLN(c[p]) && in(c, p+1, isLetter) {
		return run(c, p+1, isLetter) - p
	}
	if isLetter(c[p]) {
		return run(c, p, isLetter) - p
	}
	if isNumber(c[p]) {
		return upTo(isNumber, 3)(c, p)
	}
	q := p
	if c[p] == ' ' && in(c, p+1, notSLN) {
		q++
	}
	if in(c, q, notSLN) {
		return run(c, run(c, q, notSLN), isCRLF) - p
	}
	return 0
}
