package grammar

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
)

const benchSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":24},"age":{"type":"integer"},"pet":{"enum":["cat","dog","fish"]},"tags":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":4}},"required":["name","age","pet","tags"],"additionalProperties":false}`

// BenchmarkConstrainedDecode generates greedily from the embedded default
// model under a JSON schema and times the constraint's work (Allowed,
// SampleAllowed's mask, Accept) against the forward pass of each decode
// step. It reports grammar-ns/token, decode-ns/token and their ratio in
// percent. "cold" compiles the grammar afresh for each generation (every
// state is new); "warm" reuses one Compiled, as the server's cache does.
func BenchmarkConstrainedDecode(b *testing.B) {
	f, err := defaultmodel.File()
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f.Meta)
	if err != nil {
		b.Fatal(err)
	}
	prompt, err := tok.Encode("<|im_start|>user\nTell me about a girl and her pet.<|im_end|>\n<|im_start|>assistant\n",
		tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	if err != nil {
		b.Fatal(err)
	}
	g, err := FromSchema([]byte(benchSchema), SchemaOptions{Strict: true})
	if err != nil {
		b.Fatal(err)
	}
	warm, err := Compile(g, tok)
	if err != nil {
		b.Fatal(err)
	}
	for _, threads := range []int{1, 2} {
		m, err := engine.Load(f, engine.Options{Device: cpu.New(cpu.Options{Threads: threads})})
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []string{"cold", "warm"} {
			b.Run(fmt.Sprintf("%s/threads=%d", mode, threads), func(b *testing.B) {
				var gram, dec time.Duration
				tokens := 0
				for b.Loop() {
					c := warm
					if mode == "cold" {
						if c, err = Compile(g, tok); err != nil {
							b.Fatal(err)
						}
					}
					gt, dt, n := constrainedRun(b, m, tok, c, prompt)
					gram, dec, tokens = gram+gt, dec+dt, tokens+n
				}
				b.ReportMetric(float64(gram.Nanoseconds())/float64(tokens), "grammar-ns/token")
				b.ReportMetric(float64(dec.Nanoseconds())/float64(tokens), "decode-ns/token")
				b.ReportMetric(100*float64(gram)/float64(dec), "grammar-%-of-decode")
			})
		}
	}
}

// BenchmarkCompile times Compile of a JSON schema's grammar against the
// default model's vocabulary (the trie build), which a request pays once
// per distinct format before the server's cache holds it.
func BenchmarkCompile(b *testing.B) {
	tok := vocab(b)
	g, err := FromSchema([]byte(benchSchema), SchemaOptions{Strict: true})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Compile(g, tok); err != nil {
			b.Fatal(err)
		}
	}
}

// constrainedRun generates up to 120 tokens and returns the time spent in
// the constraint, in decode forward passes, and the tokens generated.
func constrainedRun(b *testing.B, m *engine.Model, tok *tokenizer.Tokenizer, c *Compiled, prompt []int32) (gram, dec time.Duration, n int) {
	seq, err := m.NewSequence(512)
	if err != nil {
		b.Fatal(err)
	}
	defer seq.Close()
	logits := make([]float32, tok.VocabSize())
	ctx := context.Background()
	if err := m.Forward(ctx, []engine.Step{{Seq: seq, Tokens: prompt, Output: engine.OutputLast, Logits: logits}}); err != nil {
		b.Fatal(err)
	}
	s, err := sample.New(sample.Params{}, tok.VocabSize())
	if err != nil {
		b.Fatal(err)
	}
	mt := c.NewMatcher(tok)
	set := sample.NewTokenSet(tok.VocabSize())
	for n < 120 {
		t0 := time.Now()
		set.Clear()
		if err := mt.Allowed(set); err != nil {
			b.Fatal(err)
		}
		id, err := s.SampleAllowed(logits, set)
		if err != nil {
			b.Fatal(err)
		}
		if err := mt.Accept(id); err != nil {
			b.Fatal(err)
		}
		gram += time.Since(t0)
		n++
		if tok.IsEOG(id) {
			break
		}
		t1 := time.Now()
		if err := m.Forward(ctx, []engine.Step{{Seq: seq, Tokens: []int32{id}, Output: engine.OutputLast, Logits: logits}}); err != nil {
			b.Fatal(err)
		}
		dec += time.Since(t1)
	}
	return gram, dec, n
}

// BenchmarkAllowedLargeVocab times Allowed on a vocabulary of about
// 100,000 byte-level BPE tokens (deepseek-llm's, from ../shared/vocab)
// along a fixed JSON text, cold (each state met for the first time: a
// trie walk) and warm (cached sets).
func BenchmarkAllowedLargeVocab(b *testing.B) {
	const path = "../../../shared/vocab/ggml-vocab-deepseek-llm.gguf"
	f, err := gguf.Open(path)
	if err != nil {
		b.Skipf("skipping: %v", err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f.Meta)
	if err != nil {
		b.Fatal(err)
	}
	text := `{"name": "Ada Lovelace", "age": 36, "pet": "cat", "tags": ["math", "poetry"]}`
	ids, err := tok.Encode(text, tokenizer.EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	g, err := FromSchema([]byte(benchSchema), SchemaOptions{Strict: true})
	if err != nil {
		b.Fatal(err)
	}
	warm, err := Compile(g, tok)
	if err != nil {
		b.Fatal(err)
	}
	set := sample.NewTokenSet(tok.VocabSize())
	for _, mode := range []string{"cold", "warm"} {
		b.Run(mode, func(b *testing.B) {
			var d time.Duration
			calls := 0
			for b.Loop() {
				c := warm
				if mode == "cold" {
					b.StopTimer()
					if c, err = Compile(g, tok); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				m := c.NewMatcher(tok)
				for _, id := range ids {
					t0 := time.Now()
					set.Clear()
					if err := m.Allowed(set); err != nil {
						b.Fatal(err)
					}
					d += time.Since(t0)
					calls++
					if err := m.Accept(id); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(d.Nanoseconds())/float64(calls), "ns/Allowed")
			b.ReportMetric(float64(tok.VocabSize()), "vocab")
		})
	}
}
