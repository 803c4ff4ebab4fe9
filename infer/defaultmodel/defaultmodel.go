package defaultmodel

import (
	"crypto/sha256"
	_ "embed" // the model file is embedded
	"encoding/hex"
	"fmt"

	"github.com/muserhq/muser/infer/gguf"
)

// The embedded model file. A string, so the bytes in the binary are
// read-only; Bytes hands out copies.
//
//go:embed model.gguf
var data string

const (
	// Name is the model's name: its general.name metadata, and the model
	// id muser reports when it serves the default model.
	Name = "muser-default"

	// FileName is the name of the embedded file in this package's
	// directory.
	FileName = "model.gguf"

	// SHA256 is the hex SHA-256 of the embedded GGUF file.
	SHA256 = "e2924f27e65e0ee1ad5f60c883be389eeee59fe84d129518beb78309fc89d3c9"

	// Size is the size of the embedded GGUF file in bytes.
	Size = 7308896

	// ChatTemplate is the model's tokenizer.chat_template: ChatML with no
	// default system prompt, and the tool-calling sections of Qwen2.5's
	// template. A conversation with no tools, no tool calls and no tool
	// messages renders exactly as plain ChatML does: each message as
	// "<|im_start|>{role}\n{content}<|im_end|>\n", the generation prompt as
	// "<|im_start|>assistant\n". With tools, a system turn comes first: the
	// conversation's own system message (if any) and a blank line, then the
	// "# Tools" section that lists each tool as JSON (tojson) between
	// <tools></tools> and asks for calls as
	// <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>. An
	// assistant message's tool_calls render in that form after its content;
	// tool messages render as one user turn of <tool_response> blocks per run
	// of consecutive tool messages, as Qwen2.5's template does.
	ChatTemplate = chatTemplate
)

// chatTemplate is ChatTemplate's text. The "-" markers remove the
// indentation and newlines between tags, so only quoted strings and
// message fields reach the output.
const chatTemplate = `{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages and messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
    {%- for tool in tools %}
        {{- '\n' }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'system' and loop.first and tools %}
    {%- elif message.role == 'assistant' and message.tool_calls %}
        {{- '<|im_start|>assistant' }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' + tool_call.name + '", "arguments": ' }}
            {%- if tool_call.arguments is string %}
                {{- tool_call.arguments }}
            {%- else %}
                {{- tool_call.arguments | tojson }}
            {%- endif %}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- else %}
        {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}`

// Bytes returns a copy of the embedded GGUF file (Size bytes). Each call
// allocates a new copy, which the caller owns.
func Bytes() []byte { return []byte(data) }

// Verify hashes the embedded file and returns an error wrapping ErrDigest
// if it does not match SHA256.
func Verify() error {
	sum := sha256.Sum256([]byte(data))
	if got := hex.EncodeToString(sum[:]); got != SHA256 {
		return fmt.Errorf("%w: got %s, want %s", ErrDigest, got, SHA256)
	}
	return nil
}

// File verifies the embedded model and parses it with the GGUF reader. The
// returned File reads a private copy of the bytes; it holds no resources,
// so Close is optional.
func File() (*gguf.File, error) {
	if err := Verify(); err != nil {
		return nil, err
	}
	f, err := gguf.Parse(Bytes())
	if err != nil {
		return nil, fmt.Errorf("defaultmodel: parsing the embedded %s: %w", FileName, err)
	}
	return f, nil
}
