// Package transport carries muser's replication protocol over QUIC
// (github.com/quic-go/quic-go) with TLS 1.3 mutual authentication against
// the cluster CA (package mtls).
//
// # Endpoints and connections
//
// An Endpoint owns one UDP socket. Listen makes one that also accepts
// connections; NewDialer one that only dials. Both dial with Dial(peer,
// addr): the server's certificate must name peer. Every Conn knows its
// peer's verified node name.
//
// # Revocation
//
// The mtls configuration asks the Authorizer (the node registry) during
// every handshake, so a removed node cannot connect again. Connections
// that were already open are checked again by Revalidate, which an
// endpoint runs every Config.RevalidateEvery: a connection whose peer is
// no longer admitted is closed with wire.CodeRevoked.
//
// # Errors
//
// QUIC application errors are translated to *wire.Error values carrying
// the protocol code, the side that raised it and the peer; a handshake the
// peer refused (a TLS alert) or this side refused becomes
// wire.CodeUnauthorized.
//
// # Tuning
//
// DefaultQUIC returns the flow-control windows and stream limits muser
// uses; docs/benchmarks.md records how they were chosen. quic-go raises
// the UDP socket buffers to 7 MiB when the kernel allows it and logs once
// when it cannot (net.core.rmem_max / wmem_max); see docs/replication.md.
package transport
