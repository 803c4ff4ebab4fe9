package mtls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// PEM block types this package reads and writes.
const (
	pemCertificate = "CERTIFICATE"
	pemPrivateKey  = "PRIVATE KEY"
)

// maxPEM bounds the size of a PEM file this package reads.
const maxPEM = 64 << 10

// EncodeCertPEM returns cert as a PEM "CERTIFICATE" block.
func EncodeCertPEM(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: cert.Raw})
}

// EncodeKeyPEM returns key as a PEM "PRIVATE KEY" block (PKCS #8).
func EncodeKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("mtls: encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

// ParseCertPEM decodes the single certificate of a PEM file.
func ParseCertPEM(b []byte) (*x509.Certificate, error) {
	der, err := onePEM(b, pemCertificate)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	return cert, nil
}

// ParseKeyPEM decodes the single PKCS #8 private key of a PEM file. Only
// ECDSA and Ed25519 keys are accepted.
func ParseKeyPEM(b []byte) (crypto.Signer, error) {
	der, err := onePEM(b, pemPrivateKey)
	if err != nil {
		return nil, err
	}
	return parseKeyDER(der)
}

func parseKeyDER(der []byte) (crypto.Signer, error) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		return k, nil
	case ed25519.PrivateKey:
		return k, nil
	default:
		return nil, fmt.Errorf("private key: unsupported type %T, want ECDSA or Ed25519", k)
	}
}

func onePEM(b []byte, typ string) ([]byte, error) {
	if len(b) > maxPEM {
		return nil, fmt.Errorf("PEM file is %d bytes, the limit is %d", len(b), maxPEM)
	}
	block, rest := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM block found")
	}
	if block.Type != typ {
		return nil, fmt.Errorf("PEM block is %q, want %q", block.Type, typ)
	}
	if next, _ := pem.Decode(rest); next != nil {
		return nil, fmt.Errorf("more than one PEM block; want one %q", typ)
	}
	return block.Bytes, nil
}
