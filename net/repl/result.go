package repl

import (
	"errors"
	"fmt"
	"time"

	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// Result says what one transfer did. The sender and the receiver of a
// transfer report the same pack, chunk and byte counts.
type Result struct {
	// Pack is the transferred pack's ID.
	Pack pack.Digest `json:"pack"`
	// Peer is the node on the other end.
	Peer string `json:"peer"`
	// Tokens is the number of tokens the pack covers.
	Tokens int `json:"tokens"`
	// Chunks and Bytes count the pack's distinct chunks and their size.
	Chunks int   `json:"chunks"`
	Bytes  int64 `json:"bytes"`
	// Moved and MovedBytes count the chunks the receiver lacked, which
	// crossed the wire; the others it already held.
	Moved      int   `json:"moved"`
	MovedBytes int64 `json:"moved_bytes"`
	// New is false when the receiver already had the pack (receiver side
	// only; the sender reports true).
	New bool `json:"new"`
	// WireBytes is what this side sent (sender) or received (receiver) on
	// the connection during the transfer, QUIC packets included: the
	// connection's counters, so other traffic on it at the same time is
	// counted too.
	WireBytes uint64 `json:"wire_bytes"`
	// LostBytes (sender only) is how much of WireBytes QUIC declared lost
	// and sent again: on a loaded host the receiving socket drops packets.
	// WireBytes - LostBytes counts every packet of the transfer once.
	LostBytes uint64 `json:"lost_bytes"`
	// Duration is the transfer's wall time from offer to done.
	Duration time.Duration `json:"duration_ns"`
}

// source is the receipt source naming a peer.
func source(peer string) string { return "peer:" + peer }

// refuse records a receipt for a refusal this node decided itself (not
// through the store) and returns the error to send and return.
func (n *Node) refuse(peer string, id pack.Digest, reason pack.Reason, fields []pack.FieldDiff, format string, a ...any) *wire.Error {
	detail := fmt.Sprintf(format, a...)
	r, err := n.cfg.Store.AddReceipt(store.Receipt{Reason: reason, Pack: id, Source: source(peer), Detail: detail, Fields: fields})
	if err != nil {
		n.log.Warn("could not record a receipt", "peer", peer, "reason", reason, "err", err)
	}
	return &wire.Error{Code: wire.CodeForReason(reason), Peer: peer, Receipt: r.ID, Detail: detail}
}

// asWire turns an error from the store or the network into the
// *wire.Error to send: a store refusal keeps its receipt and reason.
func asWire(peer string, err error) *wire.Error {
	var (
		we *wire.Error
		re *store.RefusalError
	)
	switch {
	case errors.As(err, &we):
		return we
	case errors.As(err, &re):
		return &wire.Error{Code: wire.CodeForReason(re.Receipt.Reason), Peer: peer, Receipt: re.Receipt.ID, Detail: re.Err.Error()}
	case errors.Is(err, store.ErrNotFound):
		return &wire.Error{Code: wire.CodeNotFound, Peer: peer, Detail: err.Error()}
	}
	return &wire.Error{Code: wire.CodeOf(err), Peer: peer, Detail: err.Error()}
}

// remote turns a refuse frame into the error it reports.
func remote(peer string, m *wire.Refuse) *wire.Error {
	return &wire.Error{Code: m.Code, Remote: true, Peer: peer, Receipt: m.Receipt, Detail: m.Detail}
}

// refuseFrame is the frame that reports err to the peer.
func refuseFrame(err *wire.Error) *wire.Refuse {
	c := err.Code
	if c == wire.CodeOK {
		c = wire.CodeInternal
	}
	return &wire.Refuse{Code: c, Receipt: err.Receipt, Detail: err.Detail}
}
