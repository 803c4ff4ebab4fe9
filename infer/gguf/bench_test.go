package gguf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/zeebo/blake3"
)

// BenchmarkOpen opens and parses real files, mapped (Open) and read into
// resident memory (OpenIn with Resident); the peer is os.ReadFile of the
// same file, which copies it into the heap once. MUSER_BENCH_MODEL adds
// a file of one's own (a model of a few GB, say).
func BenchmarkOpen(b *testing.B) {
	files := map[string]string{
		"stories260K":  filepath.Join(sharedDir, "models", "stories260K.gguf"),
		"vocab-102400": filepath.Join(sharedDir, "vocab", "ggml-vocab-deepseek-llm.gguf"),
	}
	if p := os.Getenv("MUSER_BENCH_MODEL"); p != "" {
		files[filepath.Base(p)] = p
	}
	for name, path := range files {
		if _, err := os.Stat(path); err != nil {
			b.Skipf("shared test material %s not available: %v", path, err)
		}
		st, _ := os.Stat(path)
		b.Run(name+"/Open", func(b *testing.B) {
			b.SetBytes(st.Size())
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				f, err := Open(path)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
		b.Run(name+"/OpenIn-resident", func(b *testing.B) {
			b.SetBytes(st.Size())
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				f, err := OpenIn(path, Resident)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
		b.Run(name+"/ReadFile", func(b *testing.B) {
			b.SetBytes(st.Size())
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := os.ReadFile(path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWeightsDigest hashes stories260K's weights; the peer is plain
// BLAKE3 over the whole file's bytes.
func BenchmarkWeightsDigest(b *testing.B) {
	path := filepath.Join(sharedDir, "models", "stories260K.gguf")
	f, err := Open(path)
	if err != nil {
		b.Skipf("shared test material %s not available: %v", path, err)
	}
	defer f.Close()
	b.Run("WeightsDigest", func(b *testing.B) {
		b.SetBytes(f.Size())
		for i := 0; i < b.N; i++ {
			WeightsDigest(f)
		}
	})
	b.Run("blake3-file", func(b *testing.B) {
		b.SetBytes(f.Size())
		for i := 0; i < b.N; i++ {
			blake3.Sum256(f.data)
		}
	})
}
