package evalset

import "errors"

// ErrNoToolCall is returned when a reply holds no complete
// <tool_call>…</tool_call> block.
var ErrNoToolCall = errors.New("evalset: no <tool_call> block in the reply")

// ErrToolCallJSON is returned when the text of a <tool_call> block is not a
// JSON object with a string "name" and an object "arguments".
var ErrToolCallJSON = errors.New("evalset: the tool call is not {\"name\": string, \"arguments\": object}")
