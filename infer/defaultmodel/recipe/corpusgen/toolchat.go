package main

import "strings"

// The fixed text of the tool section of the chat template's system turn.
const (
	toolsHeader = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>"
	toolsFooter = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
)

// toolSystemPrompts are extra system prompts of the tool conversations.
var toolSystemPrompts = []string{
	"You are a helpful assistant with tools.",
	"You are Muser. Use the tools when they help.",
	"Use a tool when you need one.",
}

// callRef is one call an assistant message makes.
type callRef struct {
	name string
	args []arg
}

// cmsg is one message of a tool conversation. role is "system", "user",
// "assistant" or "tool"; an assistant message with calls has no content.
type cmsg struct {
	role, content string
	calls         []callRef
}

// toolConv is a conversation with the tools offered in it (each the JSON
// text of a definition).
type toolConv struct {
	tools []string
	msgs  []cmsg
}

// render writes the conversation exactly as the chat template renders the
// same messages and tools (tested against infer/template).
func (c toolConv) render() string {
	var b strings.Builder
	msgs := c.msgs
	if len(c.tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		if len(msgs) > 0 && msgs[0].role == "system" {
			b.WriteString(msgs[0].content)
			b.WriteString("\n\n")
		}
		b.WriteString(toolsHeader)
		for _, t := range c.tools {
			b.WriteString("\n")
			b.WriteString(t)
		}
		b.WriteString(toolsFooter)
	}
	for i, m := range msgs {
		switch {
		case m.role == "system" && i == 0 && len(c.tools) > 0:
		case m.role == "assistant" && len(m.calls) > 0:
			b.WriteString("<|im_start|>assistant")
			if m.content != "" {
				b.WriteString("\n")
				b.WriteString(m.content)
			}
			for _, cl := range m.calls {
				b.WriteString(callText(cl.name, cl.args))
			}
			b.WriteString("<|im_end|>\n")
		case m.role == "tool":
			if i == 0 || msgs[i-1].role != "tool" {
				b.WriteString("<|im_start|>user")
			}
			b.WriteString("\n<tool_response>\n")
			b.WriteString(m.content)
			b.WriteString("\n</tool_response>")
			if i == len(msgs)-1 || msgs[i+1].role != "tool" {
				b.WriteString("<|im_end|>\n")
			}
		default:
			writeMsg(&b, m.role, m.content)
		}
	}
	return b.String()
}

// toolSet is what a tool conversation draws from: the catalog, the chat
// tasks (for requests no offered tool fits) and the excluded user messages.
type toolSet struct {
	cat      []tool
	tasks    []task
	excluded map[string]bool
}

// toolChat returns one tool conversation: one to four tools offered in a
// random order; in 85% of conversations the user asks for something one of
// them does (call, tool response, answer), otherwise a question none of
// them covers, answered directly; with one or two tools, 40% go on with a
// second request.
func toolChat(r *rng, ts toolSet) toolConv {
	k := 1 + pickWeighted(r, []int{20, 35, 30, 15})
	offered := make([]int, 0, k)
	for len(offered) < k {
		i := r.intn(len(ts.cat))
		dup := false
		for _, j := range offered {
			dup = dup || i == j
		}
		if !dup {
			offered = append(offered, i)
		}
	}
	// Parameter descriptions and a second request make a conversation
	// longer; they are drawn only with few tools, so that nearly every
	// conversation fits the default model's 512-token context.
	withDesc := k <= 3 && r.chance(0.25)
	var conv toolConv
	for _, i := range offered {
		conv.tools = append(conv.tools, ts.cat[i].json(withDesc))
	}
	if r.chance(0.3) {
		sys := pick(r, systemPrompts)
		if r.chance(0.4) {
			sys = pick(r, toolSystemPrompts)
		}
		conv.msgs = append(conv.msgs, cmsg{role: "system", content: sys})
	}
	n := 1
	if k <= 2 && r.chance(0.4) {
		n = 2
	}
	for e := 0; e < n; e++ {
		if r.chance(0.85) {
			t := ts.cat[offered[r.intn(len(offered))]]
			var c call
			for {
				if c = t.make(r); !ts.excluded[c.user] {
					break
				}
			}
			conv.msgs = append(conv.msgs,
				cmsg{role: "user", content: c.user},
				cmsg{role: "assistant", calls: []callRef{{t.name, c.args}}},
				cmsg{role: "tool", content: c.result},
				cmsg{role: "assistant", content: c.answer})
			continue
		}
		tr := noToolTurn(r, ts, offered)
		conv.msgs = append(conv.msgs, cmsg{role: "user", content: tr.user}, cmsg{role: "assistant", content: tr.assistant})
	}
	return conv
}

// noToolTurn draws a chat question that none of the offered tools answers,
// with its plain answer.
func noToolTurn(r *rng, ts toolSet, offered []int) turn {
	covered := map[string]bool{}
	timeOrWeather := false
	for _, i := range offered {
		for _, c := range ts.cat[i].covers {
			covered[c] = true
		}
		n := ts.cat[i].name
		timeOrWeather = timeOrWeather || n == "get_weather" || n == "get_time"
	}
	var allowed []task
	total := 0
	for _, t := range ts.tasks {
		// "What is the weather today?" is declined without tools; with a
		// weather or time tool offered it would be ambiguous.
		if covered[t.name] || (t.name == "unknown" && timeOrWeather) {
			continue
		}
		allowed = append(allowed, t)
		total += t.weight
	}
	t := pickTask(r, allowed, total)
	for {
		if tr := t.make(r, ""); !ts.excluded[tr.user] {
			return tr
		}
	}
}

// pickWeighted returns an index of w with probability proportional to its
// weight.
func pickWeighted(r *rng, w []int) int {
	total := 0
	for _, x := range w {
		total += x
	}
	x := r.intn(total)
	for i, v := range w {
		if x < v {
			return i
		}
		x -= v
	}
	return len(w) - 1
}
