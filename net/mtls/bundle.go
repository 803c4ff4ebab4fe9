package mtls

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Bundle is what a CA holder gives a new node: everything it needs to join
// the cluster. It holds a private key and the cluster's link secret, so it
// must travel and rest like a password (the CLI writes it mode 0600).
//
// # Layout (version 1)
//
// All integers are little-endian.
//
//	offset  size  field
//	0       8     magic "MUSERBDL"
//	8       2     version, 1
//	10      2     reserved, 0
//	12      ...   seven fields in this order, each a uint32 length n
//	              followed by n bytes:
//	                cluster ID       exactly 16 bytes
//	                node name        1..63 bytes, a valid node name
//	                issuer name      1..63 bytes, a valid node name
//	                node certificate 1..16384 bytes, X.509 DER
//	                node key         1..4096 bytes, PKCS #8 DER (ECDSA or Ed25519)
//	                CA certificate   1..16384 bytes, X.509 DER
//	                link secret      exactly 32 bytes
//	end-32  32    SHA-256 of every byte before it
//
// A file longer than MaxBundleSize, or with bytes after the checksum, is
// refused.
type Bundle struct {
	// ClusterID is the cluster's ID, hex-encoded.
	ClusterID string
	// Node is the enrolled node's credential.
	Node *Credential
	// Issuer is the name of the node that enrolled it (a CA holder).
	Issuer string
	// CA is the cluster CA certificate.
	CA *x509.Certificate
	// LinkSecret keys the seals of replication offers (docs/replication.md).
	LinkSecret [LinkSecretLen]byte
}

// LinkSecretLen is the length in bytes of a cluster link secret.
const LinkSecretLen = 32

// BundleVersion is the bundle layout version this package writes and reads.
const BundleVersion = 1

// MaxBundleSize bounds the size of a bundle file.
const MaxBundleSize = 64 << 10

const bundleMagic = "MUSERBDL"

// Field bounds of the bundle layout.
const (
	maxCertDER = 16 << 10
	maxKeyDER  = 4 << 10
)

type bundleField struct {
	name     string
	min, max int
}

var bundleFields = [...]bundleField{
	{"cluster ID", ClusterIDLen, ClusterIDLen},
	{"node name", 1, MaxNameLen},
	{"issuer name", 1, MaxNameLen},
	{"node certificate", 1, maxCertDER},
	{"node key", 1, maxKeyDER},
	{"CA certificate", 1, maxCertDER},
	{"link secret", LinkSecretLen, LinkSecretLen},
}

// MarshalBinary encodes the bundle in the layout above.
func (b *Bundle) MarshalBinary() ([]byte, error) {
	if b.Node == nil || b.Node.Cert == nil || b.Node.Key == nil || b.CA == nil {
		return nil, errors.New("mtls: bundle is missing its credential or CA certificate")
	}
	cid, err := hex.DecodeString(b.ClusterID)
	if err != nil || len(cid) != ClusterIDLen {
		return nil, fmt.Errorf("mtls: bundle cluster ID %q is not %d hex-encoded bytes", b.ClusterID, ClusterIDLen)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(b.Node.Key)
	if err != nil {
		return nil, fmt.Errorf("mtls: bundle node key: %w", err)
	}
	values := [len(bundleFields)][]byte{
		cid, []byte(b.Node.Name), []byte(b.Issuer), b.Node.Cert.Raw, keyDER, b.CA.Raw, b.LinkSecret[:],
	}
	out := make([]byte, 0, 12+8*len(values)+sha256.Size+len(b.Node.Cert.Raw)+len(b.CA.Raw)+len(keyDER)+200)
	out = append(out, bundleMagic...)
	out = binary.LittleEndian.AppendUint16(out, BundleVersion)
	out = binary.LittleEndian.AppendUint16(out, 0)
	for i, v := range values {
		f := bundleFields[i]
		if len(v) < f.min || len(v) > f.max {
			return nil, fmt.Errorf("mtls: bundle %s is %d bytes, want %d..%d", f.name, len(v), f.min, f.max)
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
		out = append(out, v...)
	}
	sum := sha256.Sum256(out)
	return append(out, sum[:]...), nil
}

// ParseBundle decodes a bundle. It checks the size, magic, version and
// checksum first (so damage reads as damage), then the layout, the
// names, and that the certificates and key parse; Check verifies that they
// belong together. Errors wrap ErrBadBundle and name the field at fault.
func ParseBundle(data []byte) (*Bundle, error) {
	if len(data) > MaxBundleSize {
		return nil, &BundleError{Field: "size", Err: fmt.Errorf("%d bytes, the limit is %d", len(data), MaxBundleSize)}
	}
	if len(data) < 12+sha256.Size {
		return nil, &BundleError{Field: "size", Err: fmt.Errorf("%d bytes is too short to be a bundle", len(data))}
	}
	if string(data[:8]) != bundleMagic {
		return nil, &BundleError{Field: "magic", Err: fmt.Errorf("got %q, want %q (not a muser bundle)", data[:8], bundleMagic)}
	}
	if v := binary.LittleEndian.Uint16(data[8:]); v != BundleVersion {
		return nil, &BundleError{Field: "version", Err: fmt.Errorf("got %d, want %d", v, BundleVersion)}
	}
	if r := binary.LittleEndian.Uint16(data[10:]); r != 0 {
		return nil, &BundleError{Field: "reserved", Err: fmt.Errorf("got %#x, want 0", r)}
	}
	body, trailer := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], trailer) {
		return nil, &BundleError{Field: "checksum", Err: fmt.Errorf("SHA-256 %x, file says %x (damaged or truncated)", sum, trailer)}
	}
	var values [len(bundleFields)][]byte
	rest := body[12:]
	for i, f := range bundleFields {
		if len(rest) < 4 {
			return nil, &BundleError{Field: f.name, Err: errors.New("truncated before its length")}
		}
		n := binary.LittleEndian.Uint32(rest)
		rest = rest[4:]
		if n < uint32(f.min) || n > uint32(f.max) {
			return nil, &BundleError{Field: f.name, Err: fmt.Errorf("length %d out of range %d..%d", n, f.min, f.max)}
		}
		if uint32(len(rest)) < n {
			return nil, &BundleError{Field: f.name, Err: fmt.Errorf("length %d but only %d bytes remain", n, len(rest))}
		}
		values[i], rest = rest[:n], rest[n:]
	}
	if len(rest) != 0 {
		return nil, &BundleError{Field: "trailer", Err: fmt.Errorf("%d unexpected bytes after the link secret", len(rest))}
	}

	b := &Bundle{ClusterID: hex.EncodeToString(values[0])}
	name, issuer := string(values[1]), string(values[2])
	if err := ValidateName(name); err != nil {
		return nil, &BundleError{Field: "node name", Err: err}
	}
	if err := ValidateName(issuer); err != nil {
		return nil, &BundleError{Field: "issuer name", Err: err}
	}
	cert, err := x509.ParseCertificate(values[3])
	if err != nil {
		return nil, &BundleError{Field: "node certificate", Err: err}
	}
	key, err := parseKeyDER(values[4])
	if err != nil {
		return nil, &BundleError{Field: "node key", Err: err}
	}
	ca, err := x509.ParseCertificate(values[5])
	if err != nil {
		return nil, &BundleError{Field: "CA certificate", Err: err}
	}
	b.Node = &Credential{Name: name, Cert: cert, Key: key}
	b.Issuer = issuer
	b.CA = ca
	copy(b.LinkSecret[:], values[6])
	return b, nil
}

// Check verifies that the bundle's parts belong together at now: the node
// credential passes Credential.Check against the CA, the CA is a CA
// certificate of the bundle's cluster, and the link secret is not all zero.
func (b *Bundle) Check(now time.Time) error {
	if !b.CA.IsCA {
		return fmt.Errorf("%w: the bundle's CA certificate is not a CA", ErrBadCredential)
	}
	if got := ClusterID(b.CA); got != b.ClusterID {
		return fmt.Errorf("%w: the bundle is for cluster %s but its CA certificate is for cluster %q", ErrBadCredential, b.ClusterID, got)
	}
	if b.LinkSecret == [LinkSecretLen]byte{} {
		return fmt.Errorf("%w: the bundle's link secret is all zero", ErrBadCredential)
	}
	return b.Node.Check(b.CA, now)
}
