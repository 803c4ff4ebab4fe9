// Package kvcache holds the key/value cache of one sequence and moves
// blocks of it to and from pack chunks.
//
// # Layout in memory
//
// For each layer l there is one K slice and one V slice of
// Cap()·RowElems() elements (RowElems = KVHeads·HeadDim): the row of token
// position p is [p·RowElems, (p+1)·RowElems), heads one after another, each
// HeadDim elements. Elements are IEEE binary16 (DTypeF16, held as uint16)
// or binary32 (DTypeF32). K is stored after RoPE. The engine writes rows
// and reads them back for attention; this package never interprets them.
//
// # Chunk payload (layout lkv1)
//
// A block of B tokens starting at position first exports to
// Layers·2·B·RowElems elements: for l = 0..Layers-1 in order, the K rows of
// positions first..first+B-1, then the V rows of the same positions
// (token-major [B][KVHeads][HeadDim]), each element little-endian. This is
// the chunk payload of engine muser-cpu, KV layout lkv1 (docs/kvpack.md,
// "Chunk payload"); because rows are contiguous per layer, export and
// import are 2·Layers copies.
//
// # Growth
//
// A cache is created with a maximum number of tokens and allocates lazily:
// Reserve grows the slices (doubling, at least 256 tokens, never past the
// maximum), so memory follows the tokens actually held.
package kvcache
