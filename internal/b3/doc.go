// Package b3 computes BLAKE3 digests in plain hash mode (32 bytes) with a
// sixteen-lane AVX-512 kernel where the CPU has one, and through
// github.com/zeebo/blake3 (AVX2, SSE4.1 or portable Go) everywhere else.
// Both give the same bytes: BLAKE3 is one function, and the tests check
// this package against zeebo/blake3 on every length class and write split.
//
// It exists for the bulk data paths: chunk IDs of KV packs (publish,
// verify, restore, replication, the fleet tier) and the weights digest of
// a GGUF file, where BLAKE3 is a large part of the CPU a byte costs.
// zeebo/blake3 hashes eight chunks at a time with AVX2; on a CPU with
// AVX-512 this package hashes sixteen (docs/benchmarks.md, "BLAKE3").
// Keyed and derive-key modes stay with zeebo/blake3.
//
// How the tree is built. BLAKE3 splits its input into 1,024-byte chunks,
// hashes each chunk to a chaining value, and combines pairs of chaining
// values by parent compressions into a binary tree whose left subtrees are
// complete. The Hasher buffers up to 16 chunks and hashes whole chunks 16
// at a time (one lane each), keeping their chaining values until a batch
// of 256 is complete; it then reduces each aligned power-of-two run of the
// batch to its two halves, 16 parents a call, and pushes them on a stack
// that is merged as the chunk count's bits say. The last chunk is never
// hashed until the digest is asked for, since only then is it known
// whether it is the root. Inputs under 16 KiB, which cannot fill the
// lanes, go to zeebo/blake3.
//
// The assembly is generated: go generate ./internal/b3 runs
// internal/asmgen.
package b3
