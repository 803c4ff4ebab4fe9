// Package blockdrafttest writes random block drafter files for tests: a
// drafter in the format of infer/blockdraft (docs/blockdraft.md) made for
// a given target GGUF model, whose tokenizer.ggml.* keys it copies and
// whose hidden size (<arch>.embedding_length) it conditions on. Options
// choose the drafter's sizes, its seed and the type of its matrices (F32
// or Q8_0).
//
//	f, _ := gguf.Open(targetPath)
//	err := blockdrafttest.WriteFile(path, f, blockdrafttest.Small())
//
// The weights are random: the drafts say nothing about the target's text,
// but they are deterministic, so tests of speculative decoding can count
// on a fixed mix of accepted and rejected tokens.
package blockdrafttest
