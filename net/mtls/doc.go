// Package mtls holds muser's cluster public-key infrastructure: the cluster
// certificate authority, node certificates, the enrollment bundle, and the
// TLS 1.3 configurations that replication connections use.
//
// # Trust model
//
// A cluster has one certificate authority (an ECDSA P-256 key and a
// self-signed certificate). Every node holds a certificate issued by it whose
// common name and only DNS name is the node's name, valid for both client and
// server authentication. A connection is accepted only when:
//
//   - both sides speak TLS 1.3 and agree on the ALPN protocol [ALPN];
//   - the peer's certificate chains to the cluster CA (and no other root);
//   - on the dialing side, the certificate names the node that was dialed;
//   - an [Authorizer] (this node's registry of enrolled peers, see package
//     cluster) accepts the peer's name and certificate, so a removed node is
//     refused even though its certificate is still signed by the CA.
//
// Authorization is asked on every handshake, so registry changes take effect
// for new connections without a restart.
//
// # Bundle
//
// [Bundle] is the one file a CA holder gives a new node (`muser node enroll`):
// the node's certificate and private key, the CA certificate, the cluster's
// link secret, and the names of the cluster and the issuing node. Its binary
// layout is documented in bundle.go and in docs/replication.md; the decoder
// bounds every length before allocating and is fuzzed.
//
// # Names
//
// Node names are DNS labels: 1 to 63 characters from a-z, 0-9 and '-',
// starting and ending with a letter or digit. [ValidateName] enforces it.
package mtls
