package serve

import (
	"strings"

	"github.com/muserhq/muser/serve/sched"
)

// This file holds what the routes share about several choices (n) and the
// tool calls of a reply.

// choices returns the number of choices g asks for.
func (g *genReq) choices() int { return max(g.n, 1) }

// parallelCalls reports whether a reply may hold several calls.
func (g *genReq) parallelCalls() bool { return g.parallel == nil || *g.parallel }

// keepCalls applies parallel_tool_calls: false keeps the first call.
func (g *genReq) keepCalls(calls []toolCall) []toolCall {
	if !g.parallelCalls() && len(calls) > 1 {
		return calls[:1]
	}
	return calls
}

// byChoice splits events by choice; events arrive in index order.
func byChoice(evs []sched.Event, n int) [][]sched.Event {
	out := make([][]sched.Event, n)
	for _, ev := range evs {
		if ev.Choice >= 0 && ev.Choice < n {
			out[ev.Choice] = append(out[ev.Choice], ev)
		}
	}
	return out
}

// choiceFinish says why choice i ended.
func choiceFinish(res sched.Result, i int) sched.Finish {
	if i < len(res.Choices) {
		return res.Choices[i].Finish
	}
	return res.Finish
}

// nilIfBlank is nil for text that is empty or white space (an assistant
// message that only calls tools has content null), else text.
func nilIfBlank(text string) any {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	return text
}

// wireToolCall is a call in an OpenAI reply.
type wireToolCall struct {
	ID       string        `json:"id"`
	Type     string        `json:"type"`
	Function deltaFunction `json:"function"`
}

// deltaToolCall is a call, or a piece of one, in a streamed OpenAI reply.
type deltaToolCall struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function deltaFunction `json:"function"`
}

type deltaFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// wireToolCalls gives calls their ids (see toolCallID).
func wireToolCalls(requestID string, choice int, calls []toolCall) []wireToolCall {
	out := make([]wireToolCall, len(calls))
	for k, c := range calls {
		out[k] = wireToolCall{ID: toolCallID(requestID, choice, k), Type: "function",
			Function: deltaFunction{Name: c.Name, Arguments: c.Arguments}}
	}
	return out
}

// anyPartial reports whether a call was cut short.
func anyPartial(calls []toolCall) bool {
	for _, c := range calls {
		if c.Partial {
			return true
		}
	}
	return false
}
