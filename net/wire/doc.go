// Package wire is the byte format of muser's replication protocol: the
// frames that travel on QUIC streams, the messages they carry, and the
// protocol's error codes. It does no I/O beyond reading and writing frames
// on the streams it is given; package repl drives the protocol.
//
// # Frames
//
// Every frame is a one-byte type, a four-byte little-endian payload length,
// and the payload. Each type has its own length bound, checked before
// anything is allocated; an unknown type, a length over the bound, or a
// payload that does not decode exactly is ErrMalformed. docs/replication.md
// gives the payload layouts; the encoders here are canonical, so decoding
// and re-encoding any accepted frame gives back its bytes (fuzzed).
//
// A chunk frame (TypeChunk) is the exception to "read the whole payload":
// its header (type, length, chunk ID) is read with ReadChunkHeader and the
// chunk's bytes are then streamed by the caller straight into the store.
//
// # Error codes
//
// Code values are the protocol's error codes, shared by Refuse messages and
// by QUIC application close and stream reset codes. An *Error carries a code,
// the side that raised it, the peer, and the receipt the refusing side
// recorded; errors.Is(err, pack.ErrRefused) holds for every refusal code, so
// the CLI maps them to exit status 4.
package wire
