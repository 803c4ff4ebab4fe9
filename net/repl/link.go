package repl

import (
	"github.com/muserhq/muser/net/mtls"
	"github.com/zeebo/blake3"
)

// linkKeyContext is the BLAKE3 derive-key context of link keys.
const linkKeyContext = "muser replication link key v1"

// LinkKey returns the seal key of the directed link from node from to node
// to (docs/replication.md, "Seals"): a BLAKE3 derived key over the link
// secret and both names, so an offer sealed for one receiver verifies at no
// other, and no receiver can pass it off as its own.
func LinkKey(secret [mtls.LinkSecretLen]byte, from, to string) []byte {
	b := make([]byte, 0, len(secret)+2+len(from)+len(to))
	b = append(b, secret[:]...)
	b = append(b, byte(len(from)))
	b = append(b, from...)
	b = append(b, byte(len(to)))
	b = append(b, to...)
	k := make([]byte, 32)
	blake3.DeriveKey(linkKeyContext, b, k)
	return k
}
