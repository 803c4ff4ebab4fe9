// Command corpusgen writes the synthetic training corpus of muser's default
// model: short simple stories, ChatML conversations, tool-calling
// conversations and JSON answers, as JSON lines.
//
// Usage:
//
//	corpusgen [-seed N] [-size BYTES] [-stories F] [-tools F] [-json F] [-o FILE]
//	corpusgen -eval FILE
//	corpusgen -tool-eval FILE
//	corpusgen -template FILE
//	corpusgen -template-cases FILE
//
// Each output line is a JSON object {"kind": "story"|"chat"|"tool"|"json",
// "text": ...}. A story's text is plain English. The text of the other kinds
// is the conversation rendered exactly as the model's chat template
// (defaultmodel.ChatTemplate) renders its messages: a chat or json document
// is plain ChatML, every message "<|im_start|>{role}\n{content}<|im_end|>\n";
// a tool document has the template's tool section in its system turn, the
// assistant's calls as <tool_call> blocks and the results as user turns of
// <tool_response> blocks. The training script adds the BOS token before
// each document and the end token (<|im_end|>) after each story.
//
// -stories, -tools and -json are the fractions of documents of those kinds
// (default 0.30, 0.15 and 0.05); the rest are chats.
//
// The output is a pure function of the flags: the same flags give
// byte-identical output on every platform (corpusgen uses its own random
// generator, not math/rand). No user message equals a held-out question or
// tool request of package evalset. -eval writes the held-out questions as
// JSON for the evaluation scripts, -tool-eval the held-out tool requests
// with their prompts rendered by the chat template, and -template the chat
// template itself (for the GGUF export). -template-cases writes 500 tool
// conversations of the corpus as OpenAI-style messages and tools with
// their corpus text, for checking other Jinja engines (recipe/verify's
// template.mjs).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/defaultmodel/evalset"
	"github.com/muserhq/muser/infer/template"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "corpusgen:", err)
		}
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("corpusgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 1, "random seed")
	size := fs.Int64("size", 100<<20, "stop after writing at least this many bytes of JSON lines")
	var m mix
	fs.Float64Var(&m.stories, "stories", 0.30, "fraction of documents that are plain stories")
	fs.Float64Var(&m.tools, "tools", 0.15, "fraction of documents that are tool-calling conversations")
	fs.Float64Var(&m.json, "json", 0.05, "fraction of documents that are conversations with JSON answers")
	out := fs.String("o", "-", "output file, - for standard output")
	eval := fs.String("eval", "", "write the held-out evaluation set as JSON to this file and exit")
	toolEval := fs.String("tool-eval", "", "write the held-out tool requests as JSON to this file and exit")
	tmpl := fs.String("template", "", "write the chat template to this file and exit")
	cases := fs.String("template-cases", "", "write 500 tool conversations with their rendered text as JSON to this file and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *eval != "" {
		return writeFile(*eval, stdout, writeEval)
	}
	if *toolEval != "" {
		return writeFile(*toolEval, stdout, writeToolEval)
	}
	if *cases != "" {
		return writeFile(*cases, stdout, writeTemplateCases)
	}
	if *tmpl != "" {
		return writeFile(*tmpl, stdout, func(w io.Writer) error {
			_, err := io.WriteString(w, defaultmodel.ChatTemplate)
			return err
		})
	}
	if *size <= 0 {
		return fmt.Errorf("-size must be positive, got %d", *size)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"-stories", m.stories}, {"-tools", m.tools}, {"-json", m.json}} {
		if !(f.v >= 0 && f.v <= 1) {
			return fmt.Errorf("%s must be within [0, 1], got %v", f.name, f.v)
		}
	}
	if sum := m.stories + m.tools + m.json; sum > 1 {
		return fmt.Errorf("-stories, -tools and -json add up to %v, more than 1", sum)
	}
	return writeFile(*out, stdout, func(w io.Writer) error {
		return generate(w, *seed, *size, m)
	})
}

// writeFile runs write on the named file ("-" for stdout), reporting the
// first error of writing or closing.
func writeFile(name string, stdout io.Writer, write func(io.Writer) error) error {
	if name == "-" {
		return write(stdout)
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	return errors.Join(err, f.Close())
}

// doc is one line of the output.
type doc struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// mix is the fraction of documents of each kind; chats are the rest.
type mix struct{ stories, tools, json float64 }

// defaultMix is corpusgen's default mix of documents.
var defaultMix = mix{stories: 0.30, tools: 0.15, json: 0.05}

// excludedPrompts is every user message the corpus must never contain: the
// held-out questions and tool requests of package evalset.
func excludedPrompts() map[string]bool {
	m := evalset.Prompts()
	for p := range evalset.ToolPrompts() {
		m[p] = true
	}
	return m
}

// generate writes documents until at least size bytes are written.
func generate(w io.Writer, seed uint64, size int64, m mix) error {
	cw := &countingWriter{w: w}
	enc := json.NewEncoder(cw)
	enc.SetEscapeHTML(false)
	master := newRNG(seed)
	ts := tasks()
	total := 0
	for _, t := range ts {
		total += t.weight
	}
	excluded := excludedPrompts()
	tset := toolSet{cat: catalog(), tasks: ts, excluded: excluded}
	facts := jsonFacts()
	for cw.n < size {
		r := master.fork()
		var d doc
		switch u := r.float(); {
		case u < m.stories:
			d = doc{"story", story(r, storySpec{})}
		case u < m.stories+m.tools:
			d = doc{"tool", toolChat(r, tset).render()}
		case u < m.stories+m.tools+m.json:
			d = doc{"json", jsonChat(r, facts, excluded)}
		default:
			d = doc{"chat", chat(r, ts, total, excluded)}
		}
		if err := enc.Encode(d); err != nil {
			return err
		}
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// evalItem is the JSON form of one evalset.Question.
type evalItem struct {
	Kind   string `json:"kind"`
	Prompt string `json:"prompt"`
	Want   string `json:"want"`
	Match  string `json:"match"`
	Answer string `json:"answer"`
}

func writeEval(w io.Writer) error {
	var items []evalItem
	for _, q := range evalset.Questions() {
		items = append(items, evalItem{q.Kind, q.Prompt, q.Want, q.Match.String(), q.Answer})
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(items)
}

// toolEvalItem is the JSON form of one evalset.ToolRequest, with the
// prompt rendered by the chat template (no system message, the tools, the
// user message, the generation prompt).
type toolEvalItem struct {
	Prompt    string            `json:"prompt"`
	Tools     []json.RawMessage `json:"tools"`
	Name      string            `json:"name"`
	Arguments json.RawMessage   `json:"arguments"`
	Text      string            `json:"text"`
}

func writeToolEval(w io.Writer) error {
	tm, err := template.Parse(defaultmodel.ChatTemplate)
	if err != nil {
		return fmt.Errorf("parsing the chat template: %w", err)
	}
	var items []toolEvalItem
	for _, q := range evalset.ToolRequests() {
		it := toolEvalItem{Prompt: q.Prompt, Name: q.Name, Arguments: json.RawMessage(q.Arguments)}
		var tools []any
		for _, t := range q.Tools {
			it.Tools = append(it.Tools, json.RawMessage(t))
			tools = append(tools, json.RawMessage(t))
		}
		it.Text, err = tm.Render(template.Context{
			Messages:            []template.Message{{Role: "user", Content: q.Prompt}},
			Tools:               tools,
			AddGenerationPrompt: true,
		})
		if err != nil {
			return fmt.Errorf("rendering tool request %q: %w", q.Prompt, err)
		}
		items = append(items, it)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(items)
}

// templateCase is one tool conversation as a client sends it (OpenAI chat
// messages and tools) with the text the corpus holds for it.
type templateCase struct {
	Messages []caseMessage     `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
	Text     string            `json:"text"`
}

// caseMessage is an OpenAI-style chat message; an assistant message that
// calls tools has null content.
type caseMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	ToolCalls []caseCall `json:"tool_calls,omitempty"`
}

type caseCall struct {
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

func writeTemplateCases(w io.Writer) error {
	ts := toolSet{cat: catalog(), tasks: tasks(), excluded: excludedPrompts()}
	var out []templateCase
	for seed := uint64(1); seed <= 500; seed++ {
		conv := toolChat(newRNG(seed), ts)
		c := templateCase{Text: conv.render()}
		for _, t := range conv.tools {
			c.Tools = append(c.Tools, json.RawMessage(t))
		}
		for _, m := range conv.msgs {
			cm := caseMessage{Role: m.role}
			if len(m.calls) == 0 {
				content := m.content
				cm.Content = &content
			}
			for _, cl := range m.calls {
				var cc caseCall
				cc.Type = "function"
				cc.Function.Name = cl.name
				cc.Function.Arguments = json.RawMessage(argsJSON(cl.args))
				cm.ToolCalls = append(cm.ToolCalls, cc)
			}
			c.Messages = append(c.Messages, cm)
		}
		out = append(out, c)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}
