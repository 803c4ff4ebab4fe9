package template

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/muserhq/muser/infer/gguf"
)

// Template is a parsed chat template. It is immutable and safe for
// concurrent use by multiple goroutines.
type Template struct {
	text string
	src  *source
	body []node
}

// Parse parses a Jinja chat template as transformers' apply_chat_template
// would compile it (trim_blocks and lstrip_blocks on, loop controls and
// the {% generation %} tag enabled). Any construct outside what this
// package implements is refused here, or when first evaluated, with an
// *Error whose Kind is ErrUnsupported and which names the construct and
// its position.
func Parse(src string) (*Template, error) {
	if !utf8.ValidString(src) {
		off := 0
		for off < len(src) {
			r, size := utf8.DecodeRuneInString(src[off:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			off += size
		}
		return nil, &Error{Kind: ErrSyntax, Pos: newSource(src[:off]).pos(off), Msg: fmt.Sprintf("invalid UTF-8 at byte %d", off)}
	}
	s := newSource(src)
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{src: s, toks: toks}
	body, err := p.parseTemplate()
	if err != nil {
		return nil, err
	}
	return &Template{text: src, src: s, body: body}, nil
}

// Source returns the template text as given to Parse.
func (t *Template) Source() string { return t.text }

// Message is one chat message, as transformers passes it to a template: a
// dict with "role" and "content", plus "name", "tool_call_id",
// "tool_calls" and "reasoning_content" when they are set (a key that is
// not set is undefined in the template, as in a Python dict without it).
type Message struct {
	// Role is "system", "user", "assistant", "tool" (or any role the
	// template accepts).
	Role string
	// Content is the text of the message, used when Parts is nil and
	// NullContent is false.
	Content string
	// Parts, when not nil, replaces Content with a list of parts, each
	// a dict {"type": ..., "text": ...} (the form multimodal templates
	// such as Gemma 3 read).
	Parts []Part
	// NullContent makes content None, as an OpenAI assistant message
	// that only calls tools has it (DeepSeek's templates test
	// `message['content'] is none`).
	NullContent bool
	// Name is the optional "name" of the message.
	Name string
	// ToolCallID is the "tool_call_id" of a tool result message.
	ToolCallID string
	// ToolCalls are the tools an assistant message calls.
	ToolCalls []ToolCall
	// ReasoningContent is the optional "reasoning_content" of an
	// assistant message (the thinking text, which Qwen3's template
	// renders inside <think></think>).
	ReasoningContent string
}

// Part is one element of a message's content list.
type Part struct {
	// Type is the part type, usually "text" (or "image").
	Type string
	// Text is the text of a "text" part. It is included in the part's
	// dict when Type is "text" or Text is not empty.
	Text string
}

// ToolCall is one call an assistant message makes. A template sees it as
// {"id": ID, "type": "function", "function": {"name": Name, "arguments":
// Arguments}}, "id" present only when ID is not empty.
type ToolCall struct {
	// ID identifies the call (Mistral's template wants 9 characters).
	ID string
	// Name is the function name.
	Name string
	// Arguments are the call's arguments: usually a JSON object
	// (map[string]any, or json.RawMessage to keep the key order), as
	// transformers expects; a string is passed through as a string (the
	// form DeepSeek's templates concatenate).
	Arguments any
}

// Context is what a template is rendered with.
type Context struct {
	// Messages is the conversation (the template variable messages).
	Messages []Message
	// Tools are the tool definitions (tools), each a JSON-like value:
	// map[string]any (keys sorted), json.RawMessage (key order kept),
	// []any, string, numbers, bool, nil. Nil means no tools: tools is
	// then None, as transformers passes it. An empty non-nil slice is an
	// empty list, which is not None: Llama 3.x then renders its tool
	// preamble with no tools, as transformers does for tools=[].
	Tools []any
	// AddGenerationPrompt asks the template to end with the header of a
	// new assistant turn (add_generation_prompt).
	AddGenerationPrompt bool
	// BOSToken and EOSToken are the text of the model's special tokens
	// (bos_token, eos_token). Both are always defined, possibly empty.
	BOSToken, EOSToken string
	// Extra holds further template variables, each a JSON-like value as
	// in Tools: for example enable_thinking (Qwen3), date_string or
	// tools_in_user_message (Llama 3.x). A key may not name a variable
	// set from the fields above.
	Extra map[string]any
	// Now gives the time strftime_now() formats; nil means time.Now.
	// The template sees the wall-clock fields of the time it returns
	// (a naive datetime, as Python's datetime.now()).
	Now func() time.Time
}

// reserved are the variables Context sets itself.
var reserved = []string{"messages", "tools", "documents", "add_generation_prompt", "bos_token", "eos_token"}

// Render renders the template for ctx. Errors are *Error values: ErrRaised
// when the template called raise_exception (for example a role it does not
// accept), ErrRender for a type error, ErrUnsupported for a construct met
// at run time, ErrLimit for a runaway template, ErrInput for a Context
// value with no template counterpart.
func (t *Template) Render(ctx Context) (string, error) {
	return t.render(ctx, defaultLimits)
}

func (t *Template) render(ctx Context, lim limits) (string, error) {
	root, err := rootScope(ctx)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	now := ctx.Now
	if now == nil {
		now = time.Now
	}
	r := &renderer{src: t.src, lim: lim, out: &out, now: now}
	fl, err := r.execBody(t.body, root)
	if err != nil {
		return "", err
	}
	if fl != flowNormal {
		return "", &Error{Kind: ErrSyntax, Msg: "break or continue outside a for loop"}
	}
	return out.String(), nil
}

func rootScope(ctx Context) (*scope, error) {
	sc := newScope(globals)
	for _, k := range sortedStringKeys(ctx.Extra) {
		for _, res := range reserved {
			if k == res {
				return nil, &Error{Kind: ErrInput, Msg: fmt.Sprintf("Extra key %q collides with a variable the Context sets", k)}
			}
		}
		v, err := fromGo(ctx.Extra[k], 0)
		if err != nil {
			return nil, &Error{Kind: ErrInput, Msg: fmt.Sprintf("Extra[%q]", k), Err: err}
		}
		sc.vars[k] = v
	}
	msgs := make([]any, len(ctx.Messages))
	for i, m := range ctx.Messages {
		d, err := messageDict(m)
		if err != nil {
			return nil, &Error{Kind: ErrInput, Msg: fmt.Sprintf("message %d", i), Err: err}
		}
		msgs[i] = d
	}
	sc.vars["messages"] = newList(msgs)
	if ctx.Tools != nil {
		tools := make([]any, len(ctx.Tools))
		for i, tl := range ctx.Tools {
			v, err := fromGo(tl, 0)
			if err != nil {
				return nil, &Error{Kind: ErrInput, Msg: fmt.Sprintf("tool %d", i), Err: err}
			}
			tools[i] = v
		}
		sc.vars["tools"] = newList(tools)
	} else {
		sc.vars["tools"] = nil
	}
	sc.vars["documents"] = nil
	sc.vars["add_generation_prompt"] = ctx.AddGenerationPrompt
	if !utf8.ValidString(ctx.BOSToken) || !utf8.ValidString(ctx.EOSToken) {
		return nil, &Error{Kind: ErrInput, Msg: "BOSToken or EOSToken is not valid UTF-8"}
	}
	sc.vars["bos_token"] = ctx.BOSToken
	sc.vars["eos_token"] = ctx.EOSToken
	return sc, nil
}

func messageDict(m Message) (*dictValue, error) {
	for _, f := range []struct{ name, v string }{{"Role", m.Role}, {"Content", m.Content}, {"Name", m.Name}, {"ToolCallID", m.ToolCallID}, {"ReasoningContent", m.ReasoningContent}} {
		if !utf8.ValidString(f.v) {
			return nil, fmt.Errorf("%s is not valid UTF-8", f.name)
		}
	}
	for i, p := range m.Parts {
		if !utf8.ValidString(p.Type) || !utf8.ValidString(p.Text) {
			return nil, fmt.Errorf("part %d is not valid UTF-8", i)
		}
	}
	for i, c := range m.ToolCalls {
		if !utf8.ValidString(c.ID) || !utf8.ValidString(c.Name) {
			return nil, fmt.Errorf("tool call %d: ID or Name is not valid UTF-8", i)
		}
	}
	d := newDict()
	d.set("role", m.Role)
	switch {
	case m.NullContent:
		d.set("content", nil)
	case m.Parts != nil:
		parts := make([]any, len(m.Parts))
		for i, p := range m.Parts {
			pd := newDict()
			pd.set("type", p.Type)
			if p.Type == "text" || p.Text != "" {
				pd.set("text", p.Text)
			}
			parts[i] = pd
		}
		d.set("content", newList(parts))
	default:
		d.set("content", m.Content)
	}
	if m.Name != "" {
		d.set("name", m.Name)
	}
	if m.ToolCallID != "" {
		d.set("tool_call_id", m.ToolCallID)
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]any, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			args, err := fromGo(c.Arguments, 0)
			if err != nil {
				return nil, fmt.Errorf("tool call %d arguments: %w", i, err)
			}
			fn := newDict()
			fn.set("name", c.Name)
			fn.set("arguments", args)
			cd := newDict()
			if c.ID != "" {
				cd.set("id", c.ID)
			}
			cd.set("type", "function")
			cd.set("function", fn)
			calls[i] = cd
		}
		d.set("tool_calls", newList(calls))
	}
	if m.ReasoningContent != "" {
		d.set("reasoning_content", m.ReasoningContent)
	}
	return d, nil
}

// ChatMLSource is the ChatML template used for models whose GGUF has no
// tokenizer.chat_template: each message as
// "<|im_start|>{role}\n{content}<|im_end|>\n", then "<|im_start|>assistant\n"
// when a generation prompt is asked for. No default system prompt.
const ChatMLSource = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

var chatML = sync.OnceValue(func() *Template {
	t, err := Parse(ChatMLSource)
	if err != nil {
		panic("template: ChatMLSource does not parse: " + err.Error())
	}
	return t
})

// ChatML returns the parsed ChatMLSource, the template for a model that
// has none.
func ChatML() *Template { return chatML() }

// Digest returns the template field of a pack identity for the template
// text src. It is gguf.TemplateDigest — BLAKE3 over the length-prefixed
// domain "muser/gguf/chat-template/v1" and the exact bytes of src, as
// stored in tokenizer.chat_template (not normalised) — so that the engine,
// `muser model inspect` and this package agree on one definition. A model
// without a template is identified by Digest("") (what
// gguf.ChatTemplateDigest gives), although it is rendered with ChatML().
func Digest(src string) [32]byte { return gguf.TemplateDigest(src) }
