// Package cluster keeps a node's cluster membership under its data
// directory: the cluster CA, the node's own credential, the link secret,
// and the registry of peers it admits. It implements the enrollment
// commands (`muser cluster init`, `muser node enroll|join|add|ls|rm`) and
// the mtls.Authorizer that replication connections consult.
//
// # Files
//
// Everything lives in HOME/cluster, a directory of mode 0700; every file is
// mode 0600 and is replaced atomically (written to a temporary file in the
// same directory, synced, renamed over the old one, directory synced):
//
//	cluster.json  cluster ID, this node's name, format version
//	ca.crt        cluster CA certificate (PEM)
//	ca.key        cluster CA private key (PEM; only on CA holders)
//	node.crt      this node's certificate (PEM)
//	node.key      this node's private key (PEM)
//	link.key      the cluster link secret (64 hex digits)
//	peers.json    the registry of peers (see Peer)
//	seal.gen      high-water mark of sealing generations (see Generations)
//	lock          taken (flock) by every read-modify-write of peers.json
//
// The registry is kept in files rather than in the store's bbolt ledger so
// that `muser node rm` works while `muser serve` holds the ledger, and so
// that a running server sees the change at its next handshake: the
// Authorizer re-reads peers.json whenever its size, modification time or
// inode changes.
//
// # Revocation
//
// `muser node rm NAME` marks the peer removed: from then on every handshake
// with a certificate naming it is refused, and transports that revalidate
// live connections drop the ones it holds. Adding the name again readmits
// it, but only with a certificate issued after the removal (NotBefore later
// than the removal instant; certificates are backdated by mtls.ClockSkew,
// so re-enroll at least that long after removing): the old certificate and
// key stay refused.
package cluster
