package serve

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// This file holds the tool-call formats: which one a chat template
// defines, and how a reply's text becomes calls, whole or streamed.

// toolFormat is how a model writes a tool call in its reply.
type toolFormat uint8

const (
	// toolFormatNone: the template defines no tool-call format.
	toolFormatNone toolFormat = iota
	// toolFormatHermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
	// one block per call (Qwen 2.5/3, Hermes, and ChatML templates).
	toolFormatHermes
	// toolFormatLlama3: the whole reply is {"name": ..., "parameters":
	// {...}}, optionally after <|python_tag|> (Llama 3.1 to 3.3).
	toolFormatLlama3
	// toolFormatMistral: [TOOL_CALLS] followed by a JSON array of
	// {"name", "arguments"} objects, or by name[ARGS]{...} per call.
	toolFormatMistral
)

func (f toolFormat) String() string {
	return [...]string{"none", "hermes", "llama3", "mistral"}[f]
}

// Markers of the formats.
const (
	hermesOpen   = "<tool_call>"
	hermesClose  = "</tool_call>"
	pythonTag    = "<|python_tag|>"
	mistralCalls = "[TOOL_CALLS]"
	mistralArgs  = "[ARGS]"
)

// detectToolFormat reads the tool-call format from a chat template's text:
// "<tool_call>" → Hermes; "[TOOL_CALLS]" → Mistral; "<|python_tag|>", or a
// Llama 3 header with the "ipython" role → Llama 3 JSON; otherwise any
// ChatML template ("<|im_start|>") → Hermes, the format ChatML models are
// trained on; anything else has none.
func detectToolFormat(src string) toolFormat {
	switch {
	case strings.Contains(src, hermesOpen):
		return toolFormatHermes
	case strings.Contains(src, mistralCalls):
		return toolFormatMistral
	case strings.Contains(src, pythonTag),
		strings.Contains(src, "<|start_header_id|>") && strings.Contains(src, "ipython"):
		return toolFormatLlama3
	case strings.Contains(src, "<|im_start|>"):
		return toolFormatHermes
	}
	return toolFormatNone
}

// toolCall is one call parsed from a reply.
type toolCall struct {
	Name string
	// Arguments is the arguments' JSON text, compacted: a JSON object,
	// unless Partial.
	Arguments string
	// Partial marks a committed Hermes call whose block was malformed or
	// cut short: Arguments are what came.
	Partial bool
}

// toolCallID is the id of call index of a reply's choice: "call_" and 24
// hex digits of SHA-256 over the request ID, the choice and the index, so
// the same request ID always names its calls the same way.
func toolCallID(requestID string, choice, index int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", requestID, choice, index))
	return "call_" + hex.EncodeToString(h[:12])
}

// callObject is a call as the formats write it in JSON.
type callObject struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"`
}

// decodeCall decodes one call object; its arguments must be a JSON object
// (or a string holding one, as some models write them).
func decodeCall(b []byte) (toolCall, bool) {
	var c callObject
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&c); err != nil || d.More() || c.Name == "" {
		return toolCall{}, false
	}
	args := c.Arguments
	if !isSet(args) {
		args = c.Parameters
	}
	if !isSet(args) {
		args = json.RawMessage("{}")
	}
	args, ok := argumentsObject(args)
	if !ok {
		return toolCall{}, false
	}
	return toolCall{Name: c.Name, Arguments: string(args)}, true
}

// argumentsObject returns args compacted when it is a JSON object, or a
// string that holds one.
func argumentsObject(args json.RawMessage) (json.RawMessage, bool) {
	args = bytes.TrimSpace(args)
	if len(args) > 0 && args[0] == '"' {
		var s string
		if json.Unmarshal(args, &s) != nil {
			return nil, false
		}
		args = bytes.TrimSpace([]byte(s))
	}
	if len(args) == 0 || args[0] != '{' || !json.Valid(args) {
		return nil, false
	}
	var b bytes.Buffer
	if json.Compact(&b, args) != nil {
		return nil, false
	}
	return b.Bytes(), true
}

// parseToolCalls splits a whole reply into its text and its calls, as
// toolStream does piece by piece. A reply whose calls do not parse is text
// (calls is nil). A Llama 3 or Mistral reply is a call only when it starts
// with one (after white space).
func parseToolCalls(f toolFormat, text string) (content string, calls []toolCall) {
	ts := &toolStream{f: f}
	c1, k1 := ts.write(text)
	c2, k2 := ts.flush()
	return c1 + c2, append(k1, k2...)
}

// parseWhole parses a whole Llama 3 or Mistral reply.
func parseWhole(f toolFormat, text string) (content string, calls []toolCall) {
	switch f {
	case toolFormatLlama3:
		if calls := parseLlama3(text); calls != nil {
			return "", calls
		}
	case toolFormatMistral:
		t := strings.TrimSpace(text)
		switch {
		case strings.HasPrefix(t, mistralCalls):
			t = t[len(mistralCalls):]
		case !strings.HasPrefix(t, "[{"): // the marker is a control token a decoder may drop
			return text, nil
		}
		if calls := parseMistral(t); calls != nil {
			return "", calls
		}
	}
	return text, nil
}

// parseLlama3 parses a reply that is one or more call objects (separated
// by ";" or white space), after an optional <|python_tag|>.
func parseLlama3(text string) []toolCall {
	t := strings.TrimSpace(text)
	t = strings.TrimSpace(strings.TrimPrefix(t, pythonTag))
	if !strings.HasPrefix(t, "{") {
		return nil
	}
	d := json.NewDecoder(strings.NewReader(t))
	var calls []toolCall
	for {
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return nil
		}
		c, ok := decodeCall(raw)
		if !ok {
			return nil
		}
		calls = append(calls, c)
		rest := strings.TrimSpace(t[d.InputOffset():])
		rest = strings.TrimSpace(strings.TrimPrefix(rest, ";"))
		if rest == "" {
			return calls
		}
		t = rest
		d = json.NewDecoder(strings.NewReader(t))
	}
}

// parseMistral parses what follows [TOOL_CALLS]: a JSON array of call
// objects, or one or more name[ARGS]{...} calls (each after its own
// [TOOL_CALLS] in the newer form).
func parseMistral(s string) []toolCall {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "[") {
		var raws []json.RawMessage
		if json.Unmarshal([]byte(t), &raws) != nil || len(raws) == 0 {
			return nil
		}
		var calls []toolCall
		for _, raw := range raws {
			c, ok := decodeCall(raw)
			if !ok {
				return nil
			}
			calls = append(calls, c)
		}
		return calls
	}
	var calls []toolCall
	for _, part := range strings.Split(t, mistralCalls) {
		part = strings.TrimSpace(part)
		i := strings.Index(part, mistralArgs)
		if i <= 0 {
			return nil
		}
		args, ok := argumentsObject(json.RawMessage(part[i+len(mistralArgs):]))
		if !ok {
			return nil
		}
		calls = append(calls, toolCall{Name: strings.TrimSpace(part[:i]), Arguments: string(args)})
	}
	return calls
}

// toolStream turns a streamed reply into content and calls. Text that may
// start a call is held back until it is known not to. A Hermes call whose
// block begins {"name": "...", "arguments": { is committed there: its name
// is known and its arguments are released as they come (compacted: white
// space outside strings dropped), and it stays a call even if its block
// turns out malformed (then its Arguments are what came, and Partial is
// set). Any other call is reported once it is complete (its closing
// marker, or the end of the reply). parseToolCalls runs the same machine
// over a whole reply, so a reply streamed in any pieces gives what it gives
// whole.
type toolStream struct {
	f       toolFormat
	buf     strings.Builder // text held back
	inCall  bool            // Hermes: inside a <tool_call> block
	whole   bool            // Llama 3, Mistral: the reply is a call; kept to the end
	started bool            // some content was released
	failed  bool            // a block did not parse: the rest is text
	calls   []toolCall
	cur     callScan // the Hermes block being read

	// record, when set, logs what write and flush release, in order, in
	// pieces (for streaming consumers; take them with drain).
	record bool
	pieces []streamPiece
}

// streamPiece is one thing a toolStream released, in order: text, the
// start of a committed call (Name), a piece of its arguments (Args), or a
// finished call (Call; Streamed says whether its start and arguments were
// released before).
type streamPiece struct {
	Text     string
	Index    int // the call's index in the reply
	Name     string
	Args     string
	Call     *toolCall
	Streamed bool
}

// callScan follows a Hermes block's arguments as they arrive.
type callScan struct {
	head     bool   // the block's {"name": ..., "arguments": { was read
	name     string // the call's name
	pos      int    // bytes of the block scanned
	depth    int    // nesting inside the arguments
	inStr    bool   // inside a string
	esc      bool   // after a backslash in a string
	argsDone bool   // the arguments' object closed
	args     strings.Builder
}

// headRE matches the start of a Hermes call up to its arguments' "{".
var headRE = regexp.MustCompile(`^\s*\{\s*"name"\s*:\s*("(?:[^"\\\x00-\x1f]|\\.)*")\s*,\s*"arguments"\s*:\s*\{`)

func (ts *toolStream) emit(p streamPiece) {
	if ts.record {
		ts.pieces = append(ts.pieces, p)
	}
}

// drain returns the pieces released since the last drain.
func (ts *toolStream) drain() []streamPiece {
	p := ts.pieces
	ts.pieces = nil
	return p
}

// addCall records a finished call.
func (ts *toolStream) addCall(c toolCall, streamed bool) []toolCall {
	ts.calls = append(ts.calls, c)
	ts.emit(streamPiece{Index: len(ts.calls) - 1, Call: &ts.calls[len(ts.calls)-1], Streamed: streamed})
	return []toolCall{c}
}

// write adds text and returns the content that can be released and the
// calls completed by it.
func (ts *toolStream) write(text string) (content string, calls []toolCall) {
	ts.buf.WriteString(text)
	if ts.f == toolFormatNone || ts.failed {
		return ts.take(), nil
	}
	switch ts.f {
	case toolFormatHermes:
		return ts.hermes(false)
	case toolFormatLlama3, toolFormatMistral:
		if ts.whole {
			return "", nil
		}
		s := ts.buf.String()
		t := strings.TrimLeft(s, " \t\r\n")
		if t == "" && !ts.started {
			return "", nil
		}
		if !ts.started {
			var markers []string
			if ts.f == toolFormatLlama3 {
				markers = []string{"{", pythonTag}
			} else {
				markers = []string{mistralCalls, "[{"}
			}
			for _, m := range markers {
				if strings.HasPrefix(t, m) {
					ts.whole = true
					return "", nil
				}
				if strings.HasPrefix(m, t) {
					return "", nil // may still become a marker
				}
			}
		}
		ts.started = true
		return ts.take(), nil
	}
	return ts.take(), nil
}

func (ts *toolStream) take() string {
	s := ts.buf.String()
	ts.buf.Reset()
	if s != "" {
		ts.started = true
		ts.emit(streamPiece{Text: s})
	}
	return s
}

// scan advances the current block's call: it reads its head, then
// releases its arguments as far as block goes.
func (ts *toolStream) scan(block string) {
	c := &ts.cur
	if !c.head {
		m := headRE.FindStringSubmatchIndex(block)
		if m == nil {
			return
		}
		var name string
		if json.Unmarshal([]byte(block[m[2]:m[3]]), &name) != nil || name == "" {
			return
		}
		c.head, c.name, c.pos = true, name, m[1]-1 // at the arguments' "{"
		ts.emit(streamPiece{Index: len(ts.calls), Name: name})
	}
	if c.argsDone {
		return
	}
	var out strings.Builder
	for ; c.pos < len(block) && !c.argsDone; c.pos++ {
		b := block[c.pos]
		if c.inStr {
			out.WriteByte(b)
			switch {
			case c.esc:
				c.esc = false
			case b == '\\':
				c.esc = true
			case b == '"':
				c.inStr = false
			}
			continue
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		case '"':
			c.inStr = true
		case '{', '[':
			c.depth++
		case '}', ']':
			c.depth--
			c.argsDone = c.depth <= 0
		}
		out.WriteByte(b)
	}
	if out.Len() > 0 {
		c.args.WriteString(out.String())
		ts.emit(streamPiece{Index: len(ts.calls), Args: out.String()})
	}
}

// endCall finishes the current block (closed, or cut by the end of the
// reply) and returns its call, or false when it is text.
func (ts *toolStream) endCall(block string) (toolCall, bool) {
	ts.scan(block)
	c := &ts.cur
	defer func() { ts.cur = callScan{} }()
	got, ok := decodeCall([]byte(strings.TrimSpace(block)))
	if !c.head {
		if ok {
			ts.addCall(got, false)
		}
		return got, ok
	}
	call := toolCall{Name: c.name, Arguments: c.args.String()}
	if ok && got.Name == c.name && got.Arguments == call.Arguments {
		ts.addCall(call, true)
		return call, true
	}
	call.Partial = true
	ts.addCall(call, true)
	return call, true
}

// hermes releases text outside <tool_call> blocks, holding back a suffix
// that may begin the marker, and follows each block (see toolStream).
// At the end (final) an unclosed block is finished as it stands.
func (ts *toolStream) hermes(final bool) (string, []toolCall) {
	var (
		out   strings.Builder
		calls []toolCall
	)
	text := func(s string) {
		if s != "" {
			out.WriteString(s)
			ts.emit(streamPiece{Text: s})
		}
	}
	for {
		s := ts.buf.String()
		if ts.inCall {
			j := strings.Index(s, hermesClose)
			if j < 0 && !final {
				ts.scan(s[:len(s)-partialSuffix(s, hermesClose)]) // not what may be the marker
				return out.String(), calls
			}
			block, rest := s, ""
			if j >= 0 {
				block, rest = s[:j], s[j+len(hermesClose):]
			}
			ts.inCall = false
			ts.buf.Reset()
			c, ok := ts.endCall(block)
			if !ok {
				ts.failed = true
				text(hermesOpen + s)
				return out.String(), calls
			}
			calls = append(calls, c)
			ts.buf.WriteString(rest)
			if final && rest == "" {
				return out.String(), calls
			}
			continue
		}
		if i := strings.Index(s, hermesOpen); i >= 0 {
			text(s[:i])
			ts.buf.Reset()
			ts.buf.WriteString(s[i+len(hermesOpen):])
			ts.inCall = true
			continue
		}
		keep := 0
		if !final {
			keep = partialSuffix(s, hermesOpen)
		}
		text(s[:len(s)-keep])
		ts.buf.Reset()
		ts.buf.WriteString(s[len(s)-keep:])
		return out.String(), calls
	}
}

// partialSuffix returns the length of the longest suffix of s that is a
// proper prefix of marker.
func partialSuffix(s, marker string) int {
	for n := min(len(s), len(marker)-1); n > 0; n-- {
		if strings.HasSuffix(s, marker[:n]) {
			return n
		}
	}
	return 0
}

// flush ends the reply: it returns the text still held and the calls it
// completes (an unclosed Hermes block, a whole Llama 3 or Mistral reply).
func (ts *toolStream) flush() (string, []toolCall) {
	switch {
	case ts.f == toolFormatHermes && !ts.failed:
		return ts.hermes(true)
	case ts.whole:
		s := ts.buf.String()
		ts.buf.Reset()
		content, calls := parseWhole(ts.f, s)
		if content != "" {
			ts.emit(streamPiece{Text: content})
		}
		for _, c := range calls {
			ts.addCall(c, false)
		}
		return content, calls
	}
	return ts.take(), nil
}
