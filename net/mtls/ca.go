package mtls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Validity periods and clock-skew allowance for the certificates this
// package issues.
const (
	// DefaultCAValidity is how long a cluster CA certificate is valid.
	DefaultCAValidity = 10 * 365 * 24 * time.Hour
	// DefaultNodeValidity is how long a node certificate is valid unless
	// the enrolling operator asks for another period.
	DefaultNodeValidity = 2 * 365 * 24 * time.Hour
	// MaxNodeValidity bounds the validity an operator may ask for.
	MaxNodeValidity = DefaultCAValidity
	// ClockSkew is how far before the issuing instant a certificate's
	// NotBefore is set, so that peers whose clocks run slightly behind the
	// issuer's accept it at once.
	ClockSkew = time.Minute
)

// clusterPrefix starts the organization of every certificate of a cluster;
// the cluster ID follows it.
const clusterPrefix = "muser cluster "

// ClusterIDLen is the length in bytes of a cluster ID (hex-encoded in
// certificates and files).
const ClusterIDLen = 16

// CA is a cluster certificate authority. Key is nil when only the
// certificate is known (on nodes that joined with a bundle).
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Credential is a node's identity: its name, its certificate issued by the
// cluster CA, and its private key.
type Credential struct {
	Name string
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewClusterID returns a fresh random cluster ID in hex.
func NewClusterID() (string, error) {
	var b [ClusterIDLen]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("mtls: cluster ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// NewCA creates a cluster CA for clusterID (hex, see NewClusterID): a fresh
// ECDSA P-256 key and a self-signed certificate valid from now (less
// ClockSkew) for DefaultCAValidity. It may sign node certificates only.
func NewCA(clusterID string, now time.Time) (*CA, error) {
	if err := validateClusterID(clusterID); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mtls: CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   "muser cluster CA " + clusterID,
			Organization: []string{clusterPrefix + clusterID},
		},
		NotBefore:             now.Add(-ClockSkew).UTC(),
		NotAfter:              now.Add(DefaultCAValidity).UTC(),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("mtls: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mtls: CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// ClusterID returns the cluster ID a certificate of this package carries
// in its organization, or "" when it carries none.
func ClusterID(cert *x509.Certificate) string {
	for _, o := range cert.Subject.Organization {
		if len(o) > len(clusterPrefix) && o[:len(clusterPrefix)] == clusterPrefix {
			return o[len(clusterPrefix):]
		}
	}
	return ""
}

// Issue creates a credential for the node called name: a fresh ECDSA P-256
// key and a certificate signed by the CA, valid from now (less ClockSkew)
// for validity (DefaultNodeValidity when zero), for client and server
// authentication, naming the node in its common name and its only DNS name.
func (ca *CA) Issue(name string, now time.Time, validity time.Duration) (*Credential, error) {
	if ca.Key == nil {
		return nil, fmt.Errorf("mtls: this node holds the cluster CA certificate but not its key; enroll nodes on a CA holder")
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if validity == 0 {
		validity = DefaultNodeValidity
	}
	if validity < 0 || validity > MaxNodeValidity {
		return nil, fmt.Errorf("mtls: node certificate validity %v out of range (0, %v]", validity, MaxNodeValidity)
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mtls: node key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   name,
			Organization: ca.Cert.Subject.Organization,
		},
		DNSNames:              []string{name},
		NotBefore:             now.Add(-ClockSkew).UTC(),
		NotAfter:              notAfter.UTC(),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("mtls: node certificate for %q: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mtls: node certificate for %q: %w", name, err)
	}
	return &Credential{Name: name, Cert: cert, Key: key}, nil
}

// Check verifies that the credential is whole and belongs to the cluster:
// the key matches the certificate, the certificate chains to ca at now, is
// valid for client and server authentication, and names Name.
func (c *Credential) Check(ca *x509.Certificate, now time.Time) error {
	if c.Cert == nil || c.Key == nil {
		return fmt.Errorf("%w: %q: certificate or key missing", ErrBadCredential, c.Name)
	}
	if err := samePublicKey(c.Cert.PublicKey, c.Key.Public()); err != nil {
		return fmt.Errorf("%w: %q: %v", ErrBadCredential, c.Name, err)
	}
	name, err := PeerName(c.Cert)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadCredential, err)
	}
	if name != c.Name {
		return fmt.Errorf("%w: certificate names %q, want %q", ErrBadCredential, name, c.Name)
	}
	return verifyChain(c.Cert, ca, now)
}

// TLSCertificate returns the credential in the form crypto/tls uses.
func (c *Credential) TLSCertificate() tls.Certificate {
	return tls.Certificate{
		Certificate: [][]byte{c.Cert.Raw},
		PrivateKey:  c.Key,
		Leaf:        c.Cert,
	}
}

// PeerName returns the node name a certificate carries: its common name,
// which must also be its one and only DNS name and a valid node name.
func PeerName(cert *x509.Certificate) (string, error) {
	name := cert.Subject.CommonName
	if err := ValidateName(name); err != nil {
		return "", fmt.Errorf("certificate common name: %w", err)
	}
	if len(cert.DNSNames) != 1 || cert.DNSNames[0] != name {
		return "", fmt.Errorf("certificate for %q has DNS names %q, want exactly [%q]", name, cert.DNSNames, name)
	}
	return name, nil
}

// verifyChain checks that leaf is signed by ca, valid at now, and usable for
// both client and server authentication.
func verifyChain(leaf, ca *x509.Certificate, now time.Time) error {
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth} {
		_, err := leaf.Verify(x509.VerifyOptions{
			Roots:       roots,
			CurrentTime: now,
			KeyUsages:   []x509.ExtKeyUsage{usage},
		})
		if err != nil {
			return fmt.Errorf("%w: %q: %v", ErrBadCredential, leaf.Subject.CommonName, err)
		}
	}
	return nil
}

func samePublicKey(a, b crypto.PublicKey) error {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	ea, ok := a.(equaler)
	if !ok {
		return fmt.Errorf("unsupported public key type %T", a)
	}
	if !ea.Equal(b) {
		return errors.New("private key does not match the certificate")
	}
	return nil
}

func newSerial() (*big.Int, error) {
	// 128 random bits, the top one cleared so the DER integer is positive
	// and at most 16 bytes.
	limit := new(big.Int).Lsh(big.NewInt(1), 127)
	n, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return nil, fmt.Errorf("mtls: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func validateClusterID(id string) error {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != ClusterIDLen {
		return fmt.Errorf("mtls: cluster ID %q is not %d hex-encoded bytes", id, ClusterIDLen)
	}
	return nil
}
