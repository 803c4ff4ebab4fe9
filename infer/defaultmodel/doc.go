// Package defaultmodel embeds muser's own small default model, so that
// `muser serve` and `muser run` work from a fresh clone with no download
// and no model file. Real users point --model at any GGUF instead.
//
// # What it is
//
// model.gguf (embedded with go:embed; Size bytes, SHA256) is a standard
// llama-architecture GGUF that llama.cpp loads and runs:
//
//   - 6,820,096 parameters: 8 layers, width 256, 8 query heads and 4
//     key/value heads (head dimension 32), SwiGLU feed-forward of 768,
//     RMSNorm (eps 1e-5), RoPE base 10000 in llama.cpp's normal layout,
//     context 512, input and output embeddings tied (the file has no
//     output.weight; llama.cpp then uses token_embd.weight for the output);
//   - every matrix in Q8_0, quantized by muser's own writer (infer/gguf,
//     infer/ggml), the RMSNorm weights in F32; general.file_type 7;
//   - its own SentencePiece BPE tokenizer of 2,048 pieces with byte
//     fallback (tokenizer.ggml.model "llama"): <unk> 0, <s> 1 (BOS, added
//     to every prompt), </s> 2, <|im_start|> 3 and <|im_end|> 4, all
//     control tokens; <|im_end|> is the EOS and the only end-of-generation
//     token; add_space_prefix is false;
//   - ChatTemplate (ChatML plus Qwen2.5's tool sections), the template the
//     recipe trained it with, as tokenizer.chat_template.
//
// ChatTemplate renders every conversation without tools exactly as plain
// ChatML; with tools it adds Qwen2.5's "# Tools" system section (each tool
// as JSON), assistant tool calls as <tool_call> blocks and tool results as
// user turns of <tool_response> blocks. The recipe's corpus renders its
// tool conversations byte for byte as ChatTemplate does.
//
// # What it knows
//
// It was trained from scratch on a synthetic corpus that the project
// generates (recipe/corpusgen): short simple stories, and ChatML
// conversations about small-number arithmetic (sums and differences up to
// 20, products up to 10 times 10), counting, spelling, colours of things,
// animal sounds and legs, days, months, a small table of capitals, greetings
// and its own name. The current recipe adds conversations that call tools
// (a catalog of 21 functions in those domains, the right one offered among
// distractors, or none fitting) and answers as JSON objects. Asked one of
// those kinds of question it answers in a
// fixed format ("3 plus 4 is 7."); otherwise it writes simple English in the
// style of its stories, or says it does not know. It is a demonstration and
// test model, not an assistant.
//
// Greedy answers to the 30 held-out questions of package evalset, whose
// exact texts the corpus never contains: 30 of 30 correct in PyTorch (fp32)
// and 30 of 30 in llama.cpp on this Q8_0 file, whose greedy answers are
// token-identical to PyTorch's (3 of 8 longer story continuations part at a
// near-tie). docs/defaultmodel.md has the figures of
// the training run (seed, data size, steps, losses, wall time) and the
// digests of every artifact.
//
// # Reproducing it
//
// recipe/README.md lists the exact commands: generate the corpus (Go,
// seeded and byte-reproducible), train the tokenizer (SentencePiece,
// byte-reproducible), train and export an F32 GGUF (PyTorch on one NVIDIA
// H200, about six minutes), quantize it with recipe/quantize, and check it
// in llama.cpp with recipe/verify. GPU training is not bitwise
// deterministic, so a rerun gives a model of the same quality, not the
// same bytes; the quantization step is deterministic.
//
// # API
//
// Bytes returns a copy of the file, File parses it with the GGUF reader
// after Verify has checked its SHA-256, and Name is the model id muser
// reports. The held-out questions, the held-out tool requests and their
// grading live in the evalset sub-package.
package defaultmodel
