package evalset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// ToolRequest is one held-out tool-calling request: a user message, the
// tools offered with it, and the one call a correct reply makes.
type ToolRequest struct {
	// Prompt is the complete user message, sent as the only message of a
	// conversation with no system prompt.
	Prompt string
	// Tools are the tools offered, in order, each the JSON of one
	// {"type": "function", "function": {...}} definition exactly as the
	// training corpus writes it (the chat template prints each with
	// tojson, which keeps this text when it is passed as json.RawMessage).
	Tools []string
	// Name is the function a correct reply calls.
	Name string
	// Arguments is the JSON object of the arguments a correct reply
	// passes; compared as decoded JSON values, not as text.
	Arguments string
}

// ToolCall is a function call parsed from a reply.
type ToolCall struct {
	// Name is the called function's name.
	Name string
	// Arguments is the call's JSON object of arguments, as written.
	Arguments json.RawMessage
}

// ParseToolCall returns the first call in reply: the text between the
// first "<tool_call>" and the next "</tool_call>", which must be a JSON
// object {"name": string, "arguments": object} (white space around it is
// ignored). It returns an error wrapping ErrNoToolCall when there is no
// complete block, and one wrapping ErrToolCallJSON when its text is not
// such an object.
func ParseToolCall(reply string) (ToolCall, error) {
	const open, end = "<tool_call>", "</tool_call>"
	i := strings.Index(reply, open)
	if i < 0 {
		return ToolCall{}, ErrNoToolCall
	}
	body := reply[i+len(open):]
	j := strings.Index(body, end)
	if j < 0 {
		return ToolCall{}, fmt.Errorf("%w: <tool_call> at byte %d is not closed", ErrNoToolCall, i)
	}
	var c struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(strings.NewReader(body[:j]))
	if err := dec.Decode(&c); err != nil {
		return ToolCall{}, fmt.Errorf("%w: %v", ErrToolCallJSON, err)
	}
	if dec.More() {
		return ToolCall{}, fmt.Errorf("%w: text after the object", ErrToolCallJSON)
	}
	if c.Name == nil {
		return ToolCall{}, fmt.Errorf("%w: no \"name\"", ErrToolCallJSON)
	}
	var args map[string]any
	if a := bytes.TrimSpace(c.Arguments); len(a) == 0 || a[0] != '{' || json.Unmarshal(a, &args) != nil {
		return ToolCall{}, fmt.Errorf("%w: \"arguments\" is not an object of JSON values", ErrToolCallJSON)
	}
	return ToolCall{Name: *c.Name, Arguments: c.Arguments}, nil
}

// Check reports whether reply's first tool call (see ParseToolCall) calls
// q.Name with arguments equal to q.Arguments.
func (q ToolRequest) Check(reply string) bool {
	c, err := ParseToolCall(reply)
	return err == nil && q.CheckCall(c.Name, c.Arguments)
}

// CheckCall reports whether a call of name with the JSON arguments is the
// call q wants: the same name, and arguments that decode to the same JSON
// value as q.Arguments (key order and spacing do not matter; 3 and 3.0 are
// the same number; "3" is not 3).
func (q ToolRequest) CheckCall(name string, arguments []byte) bool {
	if name != q.Name {
		return false
	}
	var got, want any
	if json.Unmarshal(arguments, &got) != nil || json.Unmarshal([]byte(q.Arguments), &want) != nil {
		return false
	}
	return reflect.DeepEqual(got, want)
}

// ToolRequests returns the held-out tool-calling requests, in a fixed
// order. Each call returns fresh slices that the caller may modify.
func ToolRequests() []ToolRequest {
	out := make([]ToolRequest, len(toolRequests))
	for i, q := range toolRequests {
		q.Tools = append([]string(nil), q.Tools...)
		out[i] = q
	}
	return out
}

// ToolPrompts returns the set of every ToolRequest's Prompt, which the
// corpus generator must never emit as a user message.
func ToolPrompts() map[string]bool {
	m := make(map[string]bool, len(toolRequests))
	for _, q := range toolRequests {
		m[q.Prompt] = true
	}
	return m
}

// The definitions of the tools the requests offer, exactly as the corpus
// writes them (the corpus generator's tests compare them with its catalog).
const (
	toolAdd         = `{"type": "function", "function": {"name": "add", "description": "Add two numbers.", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}`
	toolSubtract    = `{"type": "function", "function": {"name": "subtract", "description": "Subtract the second number from the first.", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}`
	toolMultiply    = `{"type": "function", "function": {"name": "multiply", "description": "Multiply two numbers.", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}`
	toolWeather     = `{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}`
	toolCapital     = `{"type": "function", "function": {"name": "get_capital", "description": "Get the capital city of a country.", "parameters": {"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]}}}`
	toolSpell       = `{"type": "function", "function": {"name": "spell_word", "description": "Spell a word letter by letter.", "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}}`
	toolLegs        = `{"type": "function", "function": {"name": "count_legs", "description": "Count the legs of an animal.", "parameters": {"type": "object", "properties": {"animal": {"type": "string"}}, "required": ["animal"]}}}`
	toolColour      = `{"type": "function", "function": {"name": "get_colour", "description": "Get the usual colour of a thing.", "parameters": {"type": "object", "properties": {"thing": {"type": "string"}}, "required": ["thing"]}}}`
	toolTimer       = `{"type": "function", "function": {"name": "set_timer", "description": "Set a timer for a number of minutes.", "parameters": {"type": "object", "properties": {"minutes": {"type": "integer"}}, "required": ["minutes"]}}}`
	toolConvert     = `{"type": "function", "function": {"name": "convert_units", "description": "Convert a value from one unit to another.", "parameters": {"type": "object", "properties": {"value": {"type": "integer"}, "from_unit": {"type": "string"}, "to_unit": {"type": "string"}}, "required": ["value", "from_unit", "to_unit"]}}}`
	toolDaysUntil   = `{"type": "function", "function": {"name": "days_until", "description": "Count the days from today until a day of the week.", "parameters": {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]}}}`
	toolSendMessage = `{"type": "function", "function": {"name": "send_message", "description": "Send a text message to a person.", "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "text": {"type": "string"}}, "required": ["to", "text"]}}}`
	toolCall        = `{"type": "function", "function": {"name": "call_person", "description": "Start a phone call with a person.", "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}`
)

var toolRequests = []ToolRequest{
	{Prompt: "What is the weather in Madrid?", Tools: []string{toolWeather, toolCapital},
		Name: "get_weather", Arguments: `{"city": "Madrid"}`},
	{Prompt: "Add 7 and 8.", Tools: []string{toolMultiply, toolAdd, toolSubtract},
		Name: "add", Arguments: `{"a": 7, "b": 8}`},
	{Prompt: "Set a timer for 5 minutes.", Tools: []string{toolTimer, toolSendMessage},
		Name: "set_timer", Arguments: `{"minutes": 5}`},
	{Prompt: "How many legs does a horse have?", Tools: []string{toolColour, toolLegs},
		Name: "count_legs", Arguments: `{"animal": "horse"}`},
	{Prompt: "Spell the word garden.", Tools: []string{toolSpell},
		Name: "spell_word", Arguments: `{"word": "garden"}`},
	{Prompt: "What is the capital of Kenya?", Tools: []string{toolWeather, toolCapital, toolAdd},
		Name: "get_capital", Arguments: `{"country": "Kenya"}`},
	{Prompt: "Send a message to Tom saying I am on my way.", Tools: []string{toolCall, toolSendMessage, toolTimer},
		Name: "send_message", Arguments: `{"to": "Tom", "text": "I am on my way"}`},
	{Prompt: "Convert 3 kilometres to metres.", Tools: []string{toolConvert, toolMultiply},
		Name: "convert_units", Arguments: `{"value": 3, "from_unit": "kilometres", "to_unit": "metres"}`},
	{Prompt: "How many days until Friday?", Tools: []string{toolDaysUntil, toolWeather},
		Name: "days_until", Arguments: `{"day": "Friday"}`},
	{Prompt: "Multiply 6 by 9.", Tools: []string{toolAdd, toolMultiply, toolColour, toolTimer},
		Name: "multiply", Arguments: `{"a": 6, "b": 9}`},
}
