package serve

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
	// Arguments is the arguments' JSON text, compacted.
	Arguments string
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
	switch f {
	case toolFormatHermes:
		return parseHermes(text)
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

// parseHermes finds every <tool_call> block; the text around them is the
// content. An unclosed last block (the reply ran out of tokens) is parsed
// to the end of the text. From a block that does not parse on, the reply
// is text, as toolStream treats it.
func parseHermes(text string) (string, []toolCall) {
	var (
		rest  = text
		outer strings.Builder
		calls []toolCall
	)
	for {
		i := strings.Index(rest, hermesOpen)
		if i < 0 {
			outer.WriteString(rest)
			break
		}
		outer.WriteString(rest[:i])
		after := rest[i+len(hermesOpen):]
		body, next := after, ""
		if j := strings.Index(after, hermesClose); j >= 0 {
			body, next = after[:j], after[j+len(hermesClose):]
		}
		c, ok := decodeCall([]byte(strings.TrimSpace(body)))
		if !ok {
			outer.WriteString(rest[i:])
			break
		}
		calls = append(calls, c)
		rest = next
	}
	return outer.String(), calls
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

// toolStream turns a streamed reply into content deltas and calls. Text
// that may start a call is held back until it is known not to; a call is
// reported once it is complete (its closing marker, or the end of the
// reply).
type toolStream struct {
	f       toolFormat
	buf     strings.Builder // text held back
	inCall  bool            // Hermes: inside a <tool_call> block
	whole   bool            // Llama 3, Mistral: the reply is a call; kept to the end
	started bool            // some content was released
	failed  bool            // a block did not parse: the rest is text
	calls   []toolCall
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
		return ts.hermes()
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
	}
	return s
}

// hermes releases text outside <tool_call> blocks, holding back a suffix
// that may begin the marker, and parses each block when it closes.
func (ts *toolStream) hermes() (string, []toolCall) {
	var (
		out   strings.Builder
		calls []toolCall
	)
	for {
		s := ts.buf.String()
		if ts.inCall {
			j := strings.Index(s, hermesClose)
			if j < 0 {
				return out.String(), calls
			}
			c, ok := decodeCall([]byte(strings.TrimSpace(s[:j])))
			ts.buf.Reset()
			if !ok {
				ts.failed, ts.inCall = true, false
				out.WriteString(hermesOpen + s)
				return out.String(), calls
			}
			ts.buf.WriteString(s[j+len(hermesClose):])
			ts.inCall = false
			calls = append(calls, c)
			ts.calls = append(ts.calls, c)
			continue
		}
		if i := strings.Index(s, hermesOpen); i >= 0 {
			out.WriteString(s[:i])
			ts.buf.Reset()
			ts.buf.WriteString(s[i+len(hermesOpen):])
			ts.inCall = true
			continue
		}
		keep := partialSuffix(s, hermesOpen)
		out.WriteString(s[:len(s)-keep])
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
	s := ts.buf.String()
	ts.buf.Reset()
	switch {
	case ts.inCall:
		ts.inCall = false
		if c, ok := decodeCall([]byte(strings.TrimSpace(s))); ok {
			ts.calls = append(ts.calls, c)
			return "", []toolCall{c}
		}
		return hermesOpen + s, nil
	case ts.whole:
		content, calls := parseToolCalls(ts.f, s)
		ts.calls = append(ts.calls, calls...)
		return content, calls
	}
	return s, nil
}
