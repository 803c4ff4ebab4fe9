package engine

// The architectures muser runs. Facts from llama.cpp's llama-arch.cpp and
// llama-model.cpp (read, not copied): llama uses normal RoPE, optional
// Q/K/V/output biases and, for Llama 3.1+, rope_freqs; qwen2 uses NeoX
// RoPE and Q/K/V biases; qwen3 uses NeoX RoPE and per-head RMSNorm of Q
// and K before RoPE, with a head dimension that need not be hidden/heads.
//
// Mistral 7B models are published with general.architecture "llama" and
// run as llama. llama.cpp's llama architecture reads no sliding-window
// setting; neither does muser: attention is always over the whole
// context, so for prompts longer than Mistral v0.1's 4096-token window the
// output follows llama.cpp, not the windowed reference implementation.
func init() {
	Register(Arch{Name: "llama", Rope: RopeNormal, QKVBias: Optional, OutBias: Optional, RopeFreqs: Optional})
	Register(Arch{Name: "qwen2", Rope: RopeNeoX, QKVBias: Required})
	Register(Arch{Name: "qwen3", Rope: RopeNeoX, QKNorm: Required})
}
