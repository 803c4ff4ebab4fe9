package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"
)

// ALPN is the application protocol both sides of a muser replication
// connection must offer. Its suffix is the protocol version
// (docs/replication.md); a peer speaking another version fails the
// handshake.
const ALPN = "muser-repl/1"

// Authorizer decides whether a peer whose certificate already chains to the
// cluster CA may connect. The cluster registry implements it: an unknown or
// removed node is refused. It is called during every handshake and may be
// called again for live connections (transport revalidation), so it must be
// safe for concurrent use and reflect changes as they happen.
type Authorizer interface {
	// Authorize returns nil when the node called name, presenting cert, may
	// connect, and otherwise an error saying why (wrapping ErrUnauthorized).
	Authorize(name string, cert *x509.Certificate) error
}

// Config is what a node needs to make TLS configurations for replication
// connections.
type Config struct {
	// Credential is this node's name, certificate and key.
	Credential *Credential
	// CA is the cluster CA certificate; it is the only trusted root.
	CA *x509.Certificate
	// Authorizer admits peers by name; nil admits every peer the CA signed.
	Authorizer Authorizer
	// Time returns the current time for certificate validity checks; nil
	// means time.Now.
	Time func() time.Time
	// Refused, if not nil, is called by the server side for every peer it
	// refuses during the handshake, with the name the peer's certificate
	// claims (unverified when the chain did not verify; "" when there is
	// no readable name) and the reason. It lets a server log or record
	// refusals that never become connections.
	Refused func(claimed string, err error)
}

func (c *Config) check() error {
	if c.Credential == nil || c.Credential.Cert == nil || c.Credential.Key == nil {
		return errors.New("mtls: config has no node credential")
	}
	if c.CA == nil {
		return errors.New("mtls: config has no cluster CA certificate")
	}
	return nil
}

func (c *Config) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.CA)
	return p
}

// Server returns a TLS 1.3-only server configuration that requires a client
// certificate, verifies it against the cluster CA (and no other root) for
// client authentication, and asks the Authorizer about the peer's name.
// The chain is verified by this package rather than by crypto/tls so that
// every refusal, a certificate from another CA included, reaches Refused
// with the name the certificate claims. Session tickets are disabled so
// that every connection runs a full handshake and authorization.
func (c *Config) Server() (*tls.Config, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	cert := c.Credential.TLSCertificate()
	pool := c.pool()
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		// The chain is checked in VerifyConnection. No CA names are sent
		// in the certificate request, so a client holding a certificate of
		// another cluster still presents it and the refusal names it.
		ClientAuth:             tls.RequireAnyClientCert,
		NextProtos:             []string{ALPN},
		SessionTicketsDisabled: true,
		Time:                   c.Time,
		VerifyConnection: func(cs tls.ConnectionState) error {
			err := c.verifyClientChain(cs, pool)
			if err == nil {
				_, err = c.verifyPeer(cs, "")
			}
			if err != nil && c.Refused != nil {
				claimed := ""
				if len(cs.PeerCertificates) > 0 {
					claimed = cs.PeerCertificates[0].Subject.CommonName
					if ValidateName(claimed) != nil {
						claimed = ""
					}
				}
				c.Refused(claimed, err)
			}
			return err
		},
	}, nil
}

// verifyClientChain verifies the client's certificate chain against the
// cluster CA for client authentication, as crypto/tls would with
// RequireAndVerifyClientCert.
func (c *Config) verifyClientChain(cs tls.ConnectionState, pool *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return &PeerError{Err: errors.New("no client certificate")}
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	now := time.Now()
	if c.Time != nil {
		now = c.Time()
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return &PeerError{Name: leaf.Subject.CommonName, Err: fmt.Errorf("certificate does not verify against the cluster CA: %w", err)}
	}
	return nil
}

// Client returns a TLS 1.3-only client configuration for dialing the node
// called peer: the server's certificate must chain to the cluster CA and
// name peer, and the Authorizer must admit peer. This node's certificate is
// presented to the server.
func (c *Config) Client(peer string) (*tls.Config, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := ValidateName(peer); err != nil {
		return nil, err
	}
	cert := c.Credential.TLSCertificate()
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      c.pool(),
		ServerName:   peer,
		NextProtos:   []string{ALPN},
		Time:         c.Time,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := c.verifyPeer(cs, peer)
			return err
		},
	}, nil
}

// verifyPeer runs after crypto/tls has verified the chain: it checks the
// ALPN protocol and the peer's name (want, when not empty), then asks the
// Authorizer.
func (c *Config) verifyPeer(cs tls.ConnectionState, want string) (string, error) {
	if cs.Version != tls.VersionTLS13 {
		return "", &PeerError{Err: fmt.Errorf("TLS version %#x, want 1.3", cs.Version)}
	}
	if cs.NegotiatedProtocol != ALPN {
		return "", &PeerError{Err: fmt.Errorf("ALPN protocol %q, want %q", cs.NegotiatedProtocol, ALPN)}
	}
	if len(cs.PeerCertificates) == 0 {
		return "", &PeerError{Err: errors.New("no certificate")}
	}
	leaf := cs.PeerCertificates[0]
	name, err := PeerName(leaf)
	if err != nil {
		return "", &PeerError{Err: err}
	}
	if want != "" && name != want {
		return name, &PeerError{Name: name, Err: fmt.Errorf("dialed %q but its certificate names %q", want, name)}
	}
	if name == c.Credential.Name {
		return name, &PeerError{Name: name, Err: errors.New("peer presents this node's own name")}
	}
	if c.Authorizer != nil {
		if err := c.Authorizer.Authorize(name, leaf); err != nil {
			return name, &PeerError{Name: name, Err: err}
		}
	}
	return name, nil
}

// PeerFromState returns the node name and certificate of the peer of a
// completed handshake made with a configuration of this package (which
// verified them), or an error when the state carries no certificate.
func PeerFromState(cs tls.ConnectionState) (string, *x509.Certificate, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", nil, &PeerError{Err: errors.New("no certificate")}
	}
	leaf := cs.PeerCertificates[0]
	name, err := PeerName(leaf)
	if err != nil {
		return "", nil, &PeerError{Err: err}
	}
	return name, leaf, nil
}
