// Package template renders a model's chat template — the Jinja text stored
// in a GGUF file's tokenizer.chat_template — into the prompt string the
// model was trained on, exactly as Hugging Face transformers'
// apply_chat_template would.
//
//	t, err := template.Parse(src)            // or template.ChatML() when the model has none
//	prompt, err := t.Render(template.Context{
//		Messages:            []template.Message{{Role: "user", Content: "Hello!"}},
//		AddGenerationPrompt: true,
//		BOSToken:            "<|begin_of_text|>",
//	})
//
// # Why a purpose-built interpreter
//
// Exactness is the point: one differing space changes the tokens and so
// the KV cache key of every following block. Jinja libraries for Go
// (gonja v2, pongo2) implement Jinja-like languages with their own
// semantics; matching transformers means matching Jinja2 *and* CPython:
// str() of floats and containers, json.dumps spacing and escaping for
// tojson, Undefined behaviour, dict attribute-vs-item lookup, Python
// string methods (split, strip with arguments, startswith with tuples),
// slicing with negative steps, namespace() across loop scopes, loop
// filters, and the lexer's whitespace rules. A small interpreter written
// against those definitions is easier to make exact, to audit, and to
// harden (every error is a typed value with a position, every resource is
// bounded) than an external engine patched to agree. It needs nothing
// beyond the standard library (and infer/gguf for Digest).
//
// # The environment it reproduces
//
// transformers compiles chat templates in an ImmutableSandboxedEnvironment
// with trim_blocks=True and lstrip_blocks=True (both on, contrary to
// Jinja2's defaults), the loopcontrols extension ({% break %}, {% continue
// %}) and its own {% generation %} tag; autoescape is off; the tojson
// filter is replaced by json.dumps(x, ensure_ascii=False, indent=…,
// separators=…, sort_keys=…), so non-ASCII text stays as is and the
// default separators are ", " and ": "; the globals raise_exception(msg)
// and strftime_now(format) are added. Templates are rendered with the
// variables messages, tools (None when there are none), documents (None),
// add_generation_prompt, bos_token, eos_token, and any extra keyword
// arguments (Context.Extra: enable_thinking, date_string, ...).
//
// From Jinja2 itself: "\r\n" and "\r" become "\n" and one trailing
// newline of the template is dropped; "{%-"/"-%}" strip whitespace,
// "{%+"/"+%}" disable lstrip and trim; printing Undefined gives "", but
// arithmetic on it, its attributes and items are errors; a missing
// attribute or key, or an index out of range, gives Undefined; x.name
// looks for a Python method first (so message.items is the dict method),
// x["name"] for the item first; the sandbox refuses methods that modify a
// list or dict and attributes starting with "_"; range() is limited to
// 100,000 items.
//
// # Values
//
// Template values behave as the Python objects they stand for: None,
// bool, int (64-bit here; overflow is an error rather than a silent wrap),
// float (printed as CPython's repr: 1.0, 1e-05, 1e+16), str (indexed,
// sliced and measured in code points), list, tuple, dict (insertion
// ordered), generators (the results of map, select, reject, selectattr,
// rejectattr, unique, items and reverse: always truthy, no len(),
// iterable once), Markup (from |safe and |escape; `Markup + str` escapes
// the str). Caller values in Context.Tools, ToolCall.Arguments and
// Context.Extra are JSON-like Go values: nil, bool, integers, floats,
// string, json.Number, json.RawMessage (decoded keeping key order, as
// Python's json does), []any, []string, map[string]any (keys sorted,
// since a Go map has no order).
//
// # Unsupported constructs
//
// Everything the templates of Llama 3.x, Qwen2.5/Qwen3, Mistral (v0.1,
// v0.3, Nemo, Small), Phi-3/3.5, Gemma 2/3, SmolLM2 and DeepSeek
// (V2, V2.5, V3, R1) use is implemented, and so are all Jinja2 statements
// except: {% include %}, {% import %}, {% from %}, {% extends %},
// {% block %}, {% call %} and caller(), {% autoescape %}, {% do %},
// {% trans %}, recursive loops, *args/**kwargs in calls. Also refused: the
// filters batch, filesizeformat, forceescape, format, groupby, pprint,
// random, slice, striptags, truncate, urlencode, urlize, wordwrap,
// xmlattr, and tojson(ensure_ascii=True); the escaped test, and sameas on
// values whose identity depends on CPython internals (str, float, large
// int); the cycler, joiner and lipsum globals; printf-style `%` on
// strings; the str methods casefold, encode, expandtabs, format,
// format_map, isidentifier, isprintable, istitle, maketrans, translate;
// \N{...} escapes; strftime_now directives other than %a %A %b %B %d %e
// %F %H %I %j %m %M %p %S %T %y %Y %z %Z %% (with glibc's "-" flag);
// integers beyond 64 bits; printing a value CPython would print
// as an object address (a generator, a macro, a function). Each is refused
// with an *Error of Kind ErrUnsupported that names the construct and its
// line:column — at Parse time for tags, filters, tests and literals, at
// Render time for the rest — never rendered approximately.
//
// Known differences from transformers that remain: bos_token and
// eos_token are always defined (transformers leaves one undefined when the
// tokenizer has no such token); str.upper/lower/title and the is* string
// predicates use Go's Unicode tables and simple case mapping (CPython maps
// "ß" to "SS"); text that is not valid UTF-8 is refused (ErrSyntax for a
// template, ErrInput for a Context value), where Python could not have
// held it in the first place.
//
// # Limits
//
// A template is untrusted input (it comes from a model file). Parsing
// bounds nesting depth; rendering bounds the bytes written (32 MiB), the
// total loop iterations (2,097,152), list sizes (2,097,152 items), string
// sizes (32 MiB), macro call depth (64) and the total work (256 MiB: every
// string or list an operation reads or builds is charged by its size), and
// reports ErrLimit when one is exceeded. No template or Context is meant
// to make the package panic or run unbounded; FuzzParse checks this.
//
// # Identity
//
// Digest gives the template field of a pack identity (pack.Identity). It
// is the definition infer/gguf owns (gguf.TemplateDigest: BLAKE3 over a
// length-prefixed domain string and the template text's exact bytes), so
// there is one. A model without a template is identified by Digest(""), as
// gguf.ChatTemplateDigest reports it, and rendered with ChatML().
//
// # Families
//
// DetectFamily names the template family for logs ("llama3", "qwen3",
// ...). It is a heuristic on marker strings and never affects rendering:
// the prompt always comes from the template itself.
package template
