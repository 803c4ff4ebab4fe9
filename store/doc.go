// Package store is muser's durable KV cache: content-addressed chunk files
// on disk, a bbolt ledger of packs, receipts and the replay ledger, and a
// radix index over block-key chains that finds the longest cached prefix of
// a request. docs/kvpack.md ("Data directory" onwards) specifies the
// layout and the ordering rules that the code cites (W1–W4, R1–R3, Q1,
// D1–D2, T1–T2).
//
// # Opening
//
// Open opens a data directory, creating it unless Options.MustExist. The
// ledger's file lock makes one process the only writer; a second Open
// waits Options.LockTimeout and fails with ErrLocked. The block size is
// fixed at creation; opening with another is a *BlockSizeError.
//
// # The engine's interface
//
// *Store satisfies infer.PrefixStore: Publish makes (or refreshes) the
// pack covering exactly the given tokens, fetching only blocks the store
// does not already hold and writing only chunks not already on disk;
// Restore finds the longest cached prefix, verifies it and streams its
// blocks in order. PublishPrefix and RestorePack are the richer forms;
// Match finds a prefix without reading data.
//
// # Operations
//
// Packs, Pack, Manifest and ResolvePack describe packs; Pin, Unpin and
// Remove change them; GC keeps the store within a byte budget, least
// recently used first, never removing what a surviving pack or an
// in-flight operation uses; Verify checks everything and reports every
// finding, quarantining what fails; Stats sums up. Receipts and Receipt
// read the refusal receipts that every refusal writes (a *RefusalError
// wraps pack.ErrRefused and carries the receipt); ReasonOf classifies an
// error into a receipt's reason code.
//
// # Transfers
//
// Export and Import move one pack as a sealed export file. Replication
// uses the pieces: Admit checks a sealed offer (seal, replay ledger,
// identity, block size, root) and returns the missing chunk IDs;
// MissingChunks answers "which of these do you lack"; PutChunk (and
// PutPackChunk, whose receipts name the pack) verifies and stores a chunk
// held in memory without making any pack visible (gc reclaims it after
// the grace period if no pack comes to use it), leaving the fsync of its
// directory to the next ledger commit. A ChunkSink is the one way to take
// a pack's chunks from a stream (a replication peer, the fleet tier's
// GETs): Put hashes each chunk as it is read and refuses it before
// anything is written, its workers write, fsync and rename the files in
// the background, several at once, and Close waits until they are
// durable; a source that fails or ends early is a *SourceError, not a
// refusal. The sink writes with direct I/O (O_DIRECT) where the file
// system allows it, so received bytes are not copied into the page cache
// (ChunkWriteMode; Options.NoDirectWrites turns it off), and a restore
// asks the kernel to read the chunk files ahead of the one it verifies
// (posix_fadvise WILLNEED, about 16 MiB ahead), so that the first restore
// after such an install does not wait on one disk read at a time. PublishPack publishes the manifest atomically once
// every chunk is present, paying those directory fsyncs and advancing the
// replay ledger in the same commit. The fleet tier (store/tier) installs
// packs read from shared storage through the same calls, with
// AdmitOptions.Stored (a stored manifest is read many times, so the replay
// ledger does not apply), and records its own refusals with Refuse. On the sending side OpenPack returns a
// PackReader that checks the manifest once and reads single blocks,
// verified, in any order and from several goroutines.
//
// # Concurrency and durability
//
// All methods are safe for concurrent use. Publishes and restores lease
// the chunks they use; gc and remove never delete a leased file. A crash
// at any instant leaves a whole pack or none, and orphan files that gc
// reclaims. Every chunk write, local or received, owes its directory's
// fsync to the next ledger commit, which pays all outstanding debts first
// (docs/kvpack.md, W1); a write counts as owed from before its rename, so
// a commit that deduplicates a chunk the moment another operation renamed
// it still makes that rename durable, and at open every existing chunk
// directory is owed once, for renames a crashed process never synced.
package store
