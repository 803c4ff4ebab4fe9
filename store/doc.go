// Package store is muser's durable KV cache: content-addressed chunk files
// on disk, a bbolt ledger of packs, receipts and the replay ledger, and a
// radix index over block-key chains that finds the longest cached prefix of
// a request.
package store
