// Package tier is muser's fleet tier: packs kept in an S3-compatible
// bucket that every node of a cluster writes behind its local store and
// reads through on a local miss. docs/tier.md specifies the layout of
// objects in the bucket (normative, beside docs/kvpack.md), the
// consistency and gc rules (G1–G4) and operations.
//
// # Objects
//
// A Tier is a bucket and key prefix (ParseURL, s3://BUCKET/PREFIX) and an
// S3 client (minio-go; endpoint and credentials from the standard AWS
// variables and files, ConfigFromEnv). Chunks are objects named by their
// BLAKE3 ID; a pack is a manifest object named by its pack ID, holding
// the manifest sealed under the tier's key (EncodeObject, DecodeObject).
// The key is derived from the cluster's link secret (ClusterKey) or read
// from a key file: a bucket is shared storage, not a trusted peer, and a
// manifest not sealed under the key is refused.
//
// # Writing
//
// Upload copies one pack: the chunks the bucket lacks, read verified from
// the store, then the manifest with a conditional put (If-None-Match: *),
// so a manifest is never overwritten and never visible before its chunks.
// Uploader is the write-behind queue: bounded, retried with backoff,
// flushed by Close within a deadline.
//
// # Reading
//
// Index lists and authenticates the manifests and finds the longest
// prefix of a request the tier holds. Restore hands a consumer (the
// engine) the blocks of a pack straight from their GETs, each hashed as
// it is read and checked against the manifest's chunk ID before the
// consumer sees it, after the manifest's checks; its Fetched then
// installs the pack. Install copies a pack into the local store through
// the store's checks for received packs (Admit, a ChunkSink,
// PublishPack), streaming each chunk from its GET into the sink, which
// hashes it as it is read and writes, fsyncs and renames it in the
// background, so every refusal leaves a receipt and no unverified byte
// becomes visible. ReadThrough ties them to the server: its Restore has
// the shape of serve.Options.Restore (the tier's blocks first, the
// install in the background), and its Read installs before a local
// restore; neither fails a request.
//
// # Operations
//
// List lists the tier; Verify checks every manifest and chunk and reports
// every finding; GC keeps the tier within a byte budget, evicting the
// least recently used packs first (an install records a use, Touch),
// safe against writers on other nodes. Pin, Unpin and PinPack keep a
// pack from eviction (pins/ID objects).
package tier
