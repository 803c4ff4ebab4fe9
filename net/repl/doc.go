// Package repl is muser's replication protocol (docs/replication.md): it
// moves packs between the stores of cluster nodes over package transport,
// sending only the chunks the receiver lacks, and answers the prefill
// requests of disaggregated serving.
//
// # Nodes
//
// A Node joins a local *store.Store and the node's cluster membership
// (*cluster.Home). It dials peers by name (their address comes from the
// registry), and, after Listen, accepts their connections; Serve runs the
// accept loop. Push sends a pack to a peer, Pull fetches one, Prefill asks
// a producer to compute and ship the KV of a prompt.
//
// # Transfers
//
// A transfer has a sender (which holds the pack) and a receiver. The sender
// offers the canonical manifest sealed for the receiver (key of the directed
// link, generation, nonce); the receiver checks the seal's producer against
// the peer, the seal, the replay ledger, the identity and the root through
// store.Admit, and answers with the chunk IDs it lacks; the sender streams
// them on parallel unidirectional streams; the receiver hashes each chunk
// as it lands and hands it to a store.ChunkSink, whose workers write,
// fsync and rename the files while more chunks arrive, and publishes the
// pack with store.PublishPack once every chunk is in and durable. Every refusal leaves a receipt naming
// the peer, and its ID travels back to the other side.
//
// A sender runs one transfer at a time per receiver (docs/replication.md,
// "Replay rules"): the store records a seal's generation when the pack is
// published, so two concurrent transfers to one peer could make the
// earlier-sealed one stale.
//
// # Serving hooks
//
// Config.Prefiller makes the node a prefill producer; Config.Expect is the
// identity policy for pushed packs; Replicator pushes packs as they are
// published (muser serve --replicate-to), and its Flush drains the queue
// at shutdown.
package repl
