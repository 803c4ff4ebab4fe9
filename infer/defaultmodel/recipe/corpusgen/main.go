// Command corpusgen writes the synthetic training corpus of muser's default
// model: short simple stories and ChatML conversations, as JSON lines.
//
// Usage:
//
//	corpusgen [-seed N] [-size BYTES] [-stories FRACTION] [-o FILE]
//	corpusgen -eval FILE
//
// Each output line is a JSON object {"kind": "story"|"chat", "text": ...}.
// A story's text is plain English; a chat's text is the conversation
// rendered exactly as the ChatML chat template renders it, every message
// "<|im_start|>{role}\n{content}<|im_end|>\n". The training script adds the
// BOS token before each document and the end token (<|im_end|>) after each
// story.
//
// The output is a pure function of -seed, -size and -stories: the same
// flags give byte-identical output on every platform (corpusgen uses its own
// random generator, not math/rand). No user message equals a held-out
// question of package evalset; -eval writes that set as JSON for the
// evaluation scripts.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/muserhq/muser/infer/defaultmodel/evalset"
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
	stories := fs.Float64("stories", 0.35, "fraction of documents that are plain stories")
	out := fs.String("o", "-", "output file, - for standard output")
	eval := fs.String("eval", "", "write the held-out evaluation set as JSON to this file and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *eval != "" {
		return writeFile(*eval, stdout, writeEval)
	}
	if *size <= 0 {
		return fmt.Errorf("-size must be positive, got %d", *size)
	}
	if *stories < 0 || *stories > 1 {
		return fmt.Errorf("-stories must be within [0, 1], got %v", *stories)
	}
	return writeFile(*out, stdout, func(w io.Writer) error {
		return generate(w, *seed, *size, *stories)
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

// generate writes documents until at least size bytes are written.
func generate(w io.Writer, seed uint64, size int64, storyFrac float64) error {
	cw := &countingWriter{w: w}
	enc := json.NewEncoder(cw)
	enc.SetEscapeHTML(false)
	master := newRNG(seed)
	ts := tasks()
	total := 0
	for _, t := range ts {
		total += t.weight
	}
	excluded := evalset.Prompts()
	for cw.n < size {
		r := master.fork()
		var d doc
		if r.chance(storyFrac) {
			d = doc{"story", story(r, storySpec{})}
		} else {
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
