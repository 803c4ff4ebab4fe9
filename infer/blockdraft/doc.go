// Package blockdraft is the block drafter of speculative decoding's
// "block" lane: a small bidirectional transformer that proposes a block of
// draft tokens in ONE forward pass, conditioned on the target model's
// hidden state (in the spirit of DFlash's block drafter). docs/blockdraft.md
// is the normative description of the file format and the forward pass;
// this comment summarises them.
//
// # What a draft conditions on
//
// After the target has computed token x_p it holds two things the
// drafter uses: its final-normed hidden state h after x_p (the input of
// its output projection, engine.Row.Hidden; TargetHidden floats) and the
// anchor a = x_{p+1}, the token it sampled from those logits and has not
// yet fed. The drafter guesses x_{p+2} … x_{p+B} (B = BlockSize) from
// them: a Request carries h and a, and Draft returns up to B-1 tokens.
//
// # The forward pass
//
// A block has B positions: position 0 embeds the anchor (a row of
// token_embd), position j ≥ 1 the learnt mask embedding j-1 (mask_embd).
// Every position's input is fc·concat(e_j, h), so h reaches each
// position. L llama-style layers follow (RMSNorm, attention with RoPE at
// the position j within the block, SiLU-gated feed-forward, residuals),
// but attention is bidirectional: each position sees the whole block.
// The output norm and projection give logits at positions 1..B-1; a
// draft token is the argmax (the lowest id on ties).
//
// Draft computes every request of a call together: the n = requests·B
// rows go through each matrix product at once (infer/kernels' Pool.MatMul,
// weights read in place from the mapped file, activations quantized as the
// weight type needs); attention stays within each request's block. The
// output product is computed only for the positions a request asks for
// (1..min(Max, B-1)). The kernels are batch-invariant and every other
// step works per row, per request or per (request, head) with fixed
// orders of operations, so a request's tokens are the same alone or among
// others, on any number of threads and on every kernel variant. Buffers
// are kept across calls.
//
// The drafter's arithmetic is not the target's: a draft only decides how
// many target tokens a step may accept, never which, so it is not part of
// any pack identity.
//
// # Loading
//
// Open maps a file (Load binds an open *gguf.File) and checks every key
// and tensor against docs/blockdraft.md: general.architecture must be
// "muser-blockdraft" (else ErrNotBlockDrafter), every hyperparameter
// present and in range (block_size 2..64, heads dividing the embedding
// length, KV heads dividing the heads, an even head dimension), every
// tensor present with the dimensions they imply (*TensorError naming it,
// matching ErrShape or ErrUnsupported). Nothing in a file can make Load
// or Draft panic. CheckTarget compares the hidden and vocabulary sizes
// with the target's; the tokenizer itself (the file carries the target's
// tokenizer.ggml.* keys) is compared by the caller, for example with
// serve/sched's CheckDraftTokenizer on tokenizer.FromGGUF(m.File().Meta).
//
// # Cost
//
// A draft costs one pass of B rows through the drafter: for the trained
// shape (D 512, 2 layers, F 1536, B 8, V 2048, H 512, Q8_0) about 66 M
// multiply-adds per request and about 9 MB of weights read per call,
// whatever the number of requests: about 1 ms per request on one core of
// the development machine (BenchmarkDraft; docs/blockdraft.md has the
// measurements).
package blockdraft
