// Package prefill is the consumer side of disaggregated prefill (muser
// serve --prefill-node NAME): before a request's usual restore-then-prefill,
// Consumer.Prepare asks a producer node to compute the KV of the prompt's
// uncached blocks and installs the resulting pack, so the server restores
// them instead of computing them.
//
// # Policy
//
// Prepare does nothing when the prompt is shorter than one block or the
// local store already holds every whole block of it. Otherwise it calls
// repl.Node.Prefill. When the producer is unreachable, refuses, or sends
// something the consumer refuses, Prepare logs why and, under
// FallbackLocal (the default), returns nil so the server prefills locally;
// under FallbackFail it returns an error wrapping ErrRemoteFailed and the
// request fails.
//
// # Exactness
//
// The pack installed is verified chunk by chunk and by its Merkle root
// before it is published, and its identity must equal the consumer
// engine's in all eight fields; with batch-invariant kernels its KV is the
// bytes a local prefill would compute, so decoding from it gives the same
// output as decoding after a local prefill.
package prefill
