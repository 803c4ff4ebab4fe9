package template

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// benchConversation is a system prompt followed by n alternating user and
// assistant turns of ordinary length.
func benchConversation(n int) []Message {
	msgs := []Message{{Role: "system", Content: sysPrompt}}
	for i := 0; i < n; i++ {
		role, text := "user", "Please summarise the following paragraph in two sentences, keeping the key numbers: the quick brown fox jumps over the lazy dog "
		if i%2 == 1 {
			role, text = "assistant", "Here is a short summary that keeps the numbers you asked for, in two sentences as requested. "
		}
		msgs = append(msgs, Message{Role: role, Content: fmt.Sprintf("%s(%d)", text, i)})
	}
	return msgs
}

// nativeChatML is the peer: the ChatML prompt written by hand in Go, the
// fastest way to produce the same bytes.
func nativeChatML(msgs []Message, addGen bool) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|im_start|>")
		b.WriteString(m.Role)
		b.WriteString("\n")
		b.WriteString(m.Content)
		b.WriteString("<|im_end|>\n")
	}
	if addGen {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String()
}

var benchSizes = []int{4, 64}

// BenchmarkRender renders published templates; BenchmarkNativeChatML is
// the hand-written peer for the chatml case.
func BenchmarkRender(b *testing.B) {
	for _, name := range []string{"chatml", "qwen3", "llama-3.1", "mistral-v0.3", "deepseek-r1"} {
		tp := loadTemplate(b, name)
		for _, n := range benchSizes {
			ctx := Context{Messages: benchConversation(n), AddGenerationPrompt: true, BOSToken: "<s>", EOSToken: "</s>",
				Now: func() time.Time { return fixedNow }}
			if name == "mistral-v0.3" {
				ctx.Messages = ctx.Messages[1:] // it alternates strictly after an optional system message
				if n%2 == 0 {
					ctx.Messages = ctx.Messages[:len(ctx.Messages)-1]
				}
			}
			b.Run(fmt.Sprintf("%s/%dmsgs", name, n), func(b *testing.B) {
				out, err := tp.Render(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if name == "chatml" && out != nativeChatML(ctx.Messages, true) {
					b.Fatal("ChatML render differs from the native peer")
				}
				b.SetBytes(int64(len(out)))
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					if _, err := tp.Render(ctx); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, cpu)
			})
		}
	}
}

func BenchmarkNativeChatML(b *testing.B) {
	for _, n := range benchSizes {
		msgs := benchConversation(n)
		b.Run(fmt.Sprintf("%dmsgs", n), func(b *testing.B) {
			b.SetBytes(int64(len(nativeChatML(msgs, true))))
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				_ = nativeChatML(msgs, true)
			}
			reportCPU(b, cpu)
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"chatml", "qwen3", "llama-3.1", "mistral-v0.3"} {
		src := loadTemplate(b, name).Source()
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if _, err := Parse(src); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// reportCPU adds the process CPU time per operation since start (all
// threads, so garbage collection is included).
func reportCPU(b *testing.B, start time.Duration) {
	if d := processCPU() - start; d > 0 && b.N > 0 {
		b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
