package tokenizer

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time (user and system, all threads) the process
// has used. The benchmarks report it per op as well as wall time: on a
// shared machine wall time measures the other tenants as much as the code.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopCPU runs body b.N times (via b.Loop) and reports CPU ns per op.
func loopCPU(b *testing.B, body func()) {
	start := cpuTime()
	n := 0
	for b.Loop() {
		body()
		n++
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(n), "cpu-ns/op")
}

// benchVocabs are the tokenizers the benchmarks time. scripts/parity/bench.mjs
// times llama.cpp on the same files and text; scripts/parity/bench.sh runs
// both and prints the ratios (docs/benchmarks.md).
var benchVocabs = []struct{ name, file, pre string }{
	{"stories260K", fileStories, ""},
	{"llama-spm", fileLlama, ""},
	{"phi-3", filePhi3, ""},
	{"gpt-2", fileGPT2, ""},
	{"gpt-2+llama-bpe", fileGPT2, "llama-bpe"},
	{"gpt-neox", fileNeox, ""},
	{"falcon", fileFalcon, ""},
	{"deepseek-llm", fileDSLLM, ""},
}

func benchText(b *testing.B) string {
	text, err := os.ReadFile("testdata/bench.txt")
	if err != nil {
		b.Fatal(err)
	}
	return string(text)
}

// BenchmarkEncode tokenizes testdata/bench.txt (10 KiB of prose, code,
// numbers, tables and several scripts) with ParseSpecial, as a server
// tokenizes a rendered chat prompt.
func BenchmarkEncode(b *testing.B) {
	text := benchText(b)
	for _, bv := range benchVocabs {
		b.Run(bv.name, func(b *testing.B) {
			tok := sharedTokenizer(b, bv.file, bv.pre)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			loopCPU(b, func() {
				if _, err := tok.Encode(text, EncodeOptions{ParseSpecial: true}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkDecode detokenizes the ids of testdata/bench.txt.
func BenchmarkDecode(b *testing.B) {
	text := benchText(b)
	for _, bv := range benchVocabs {
		b.Run(bv.name, func(b *testing.B) {
			tok := sharedTokenizer(b, bv.file, bv.pre)
			ids, err := tok.Encode(text, EncodeOptions{ParseSpecial: true})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			loopCPU(b, func() {
				if _, err := tok.Decode(ids); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkNew times building a tokenizer from a parsed vocabulary (the
// GGUF parse is not included).
func BenchmarkNew(b *testing.B) {
	for _, bv := range benchVocabs {
		b.Run(bv.name, func(b *testing.B) {
			v, ok := loadShared(b, bv.file)
			if !ok {
				b.Skipf("%s absent", bv.file)
			}
			if bv.pre != "" {
				v.Pre = bv.pre
			}
			b.ReportAllocs()
			loopCPU(b, func() {
				if _, err := New(v); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
