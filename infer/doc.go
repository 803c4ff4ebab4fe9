// Package infer holds muser's inference engine: GGUF files (infer/gguf),
// tensor formats (infer/ggml), tokenizers (infer/tokenizer), chat templates
// (infer/template), kernels and model forward passes.
//
// This root package defines the one interface the engine needs from a KV
// store, PrefixStore. infer never imports store or net: the store satisfies
// the interface structurally and the program that wires them (serve, cmd)
// passes it in.
package infer
