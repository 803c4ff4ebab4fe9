// Package cuda is muser's GPU backend: an engine.Device for NVIDIA GPUs
// whose backends compute muser's exact numerics (engine.EngineName) bit
// for bit, so KV prefilled on a GPU and on a CPU is one cache, under one
// identity.
//
//	dev, err := cuda.New(cuda.Options{})   // fails with ErrNoDriver where there is no libcuda.so.1
//	m, err := engine.Open(path, engine.Options{Device: dev})
//
// # No cgo
//
// The CUDA driver (libcuda.so.1) is loaded at run time without cgo
// (internal/cu, through purego): the binary builds and its tests run on
// machines with no GPU and no CUDA, where New fails with an error naming
// the library and every path tried, and the GPU tests skip saying why.
// One goroutine locked to its OS thread owns the context; a Forward is one
// hand-over to it, however many kernels it launches.
//
// # Kernels
//
// The kernels are CUDA C in internal/cukernels, compiled ahead of time to
// an sm_90 cubin and compute_90 PTX (scripts/cuda/build-kernels.sh) and
// embedded; the PTX is loaded on a GPU other than sm_90 (or with
// Options.PTX). Each reproduces its Go definition's order of float
// operations with explicit round-to-nearest intrinsics and no contraction,
// and takes integer block sums from int8 tensor cores (cukernels,
// "Exactness"). A forward pass launches them in the CPU engine's order:
// embedding, then per layer RMSNorm, the Q/K/V products (activations
// quantized per row as the CPU quantizes them), biases, Q/K norms, RoPE
// with the front's host-computed angles (engine.Rope.Angles, uploaded per
// batch), the KV store into each row's own cache, attention, the output
// product, the residual and the feed-forward block; the logits of the rows
// that want them are computed logitRows at a time and copied back.
//
// # Graphs
//
// A forward pass of at most GraphRows rows (decode steps, small mixed
// batches, speculative verification) records its launches instead of
// making them and runs them as one CUDA graph (internal/cu, "Graphs"):
// the model keeps up to 8 graphs, reused while the kernel sequence is
// the same, with only the nodes whose grid or arguments changed set
// again (attention's as positions grow, every pointer after the buffers
// are regrown). In a graph the Q, K and V products with what follows
// each until attention, and the gate and up products, are parallel
// branches; launched directly they run one after the other. The kernels
// and their inputs are the same either way, so are the bits. A one-row
// pass multiplies a block's Q, K and V matrices in one launch (with
// RoPE), and its gate and up matrices in another, where the upload laid
// each group end to end (layer.qkv, layer.gateUp). A pass of at most
// GraphRows rows whose contexts are at most Options.FusedAttention
// positions (DefaultFusedAttention, 192), each sequence's rows a run of
// consecutive positions (decode steps, verification steps), rotates q
// and k, stores k and v and attends in one launch a layer
// (cukernels.RoPEAttention) instead of five; longer contexts keep the
// five, which spread each head's positions over many thread blocks.
// Options.NoGraphs and Options.Profile launch every kernel from the host.
//
// # Memory
//
// Weights are uploaded once, each matrix in its GGUF bytes; a block's Q,
// K and V matrices, and its gate and up matrices, lie end to end where
// each group shares a type and a row length, and its Q, K and V biases
// always do. A sequence's
// KV lives in device memory in the infer/kvcache layout (per layer, K and
// V rows of [positions][kv_heads·head_dim], f16 or f32), grown by
// doubling; a block exports to and imports from the lkv1 payload with one
// copy per layer and half. The only host copies per step are the batch's
// tokens, positions, cache addresses and RoPE angles up (one copy from
// pinned memory), and the wanted logits down.
package cuda
