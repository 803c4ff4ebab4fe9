// Command asmgen writes matmul_amd64.s, the AVX-512 matrix kernels of
// package kernels, and (with -k) rawt_k_amd64.s, the multi-token
// raw-block kernels of Q4_K, Q6_K and Q5_0 (AVX-512 and AVX2).
//
// # Why a generator
//
// The raw-block kernels unroll eight rows and several groups per block, and
// the panel kernels and the multi-token raw-block kernels (Q8_0, NVFP4,
// Q4_K, Q6_K, Q5_0) come in variants for 1 to 8 tokens and two group
// sizes; that is clearer generated than written out. The canonical orders
// the kernels implement are documented in package kernels (doc.go).
//
// # Use
//
//	go generate ./infer/kernels
//
// and commit the result; TestGeneratedFileUpToDate and
// TestGeneratedKFileUpToDate fail while a committed file differs from the
// generator's output. It depends on nothing outside the standard library.
package main
