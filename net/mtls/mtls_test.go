package mtls

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newTestCA(t testing.TB) (*CA, string) {
	t.Helper()
	id, err := NewClusterID()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA(id, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return ca, id
}

func issue(t testing.TB, ca *CA, name string) *Credential {
	t.Helper()
	c, err := ca.Issue(name, testNow, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"node-1", true},
		{"0abc9", true},
		{strings.Repeat("a", 63), true},
		{"", false},
		{strings.Repeat("a", 64), false},
		{"-a", false},
		{"a-", false},
		{"A", false},
		{"a.b", false},
		{"a_b", false},
		{"a b", false},
		{"é", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateName(tt.name)
			if got := err == nil; got != tt.ok {
				t.Fatalf("ValidateName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadName) {
				t.Fatalf("error %v does not wrap ErrBadName", err)
			}
		})
	}
}

func TestIssueAndCheck(t *testing.T) {
	ca, id := newTestCA(t)
	if got := ClusterID(ca.Cert); got != id {
		t.Fatalf("ClusterID(CA) = %q, want %q", got, id)
	}
	cred := issue(t, ca, "alpha")
	if err := cred.Check(ca.Cert, testNow); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got := ClusterID(cred.Cert); got != id {
		t.Fatalf("ClusterID(node) = %q, want %q", got, id)
	}
	if got := cred.Cert.NotAfter.Sub(testNow); got != DefaultNodeValidity {
		t.Fatalf("validity = %v, want %v", got, DefaultNodeValidity)
	}
	if cred.Cert.SerialNumber.Sign() <= 0 || cred.Cert.SerialNumber.BitLen() > 128 {
		t.Fatalf("serial %v: want a positive 128-bit number", cred.Cert.SerialNumber)
	}
	if cred2 := issue(t, ca, "alpha"); cred2.Cert.SerialNumber.Cmp(cred.Cert.SerialNumber) == 0 {
		t.Fatal("two certificates share a serial number")
	}

	other, _ := newTestCA(t)
	otherKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc string
		cred *Credential
		ca   *x509.Certificate
		now  time.Time
		want string
	}{
		{"other CA", cred, other.Cert, testNow, "unknown authority"},
		{"wrong key", &Credential{Name: "alpha", Cert: cred.Cert, Key: otherKey}, ca.Cert, testNow, "does not match"},
		{"wrong name", &Credential{Name: "beta", Cert: cred.Cert, Key: cred.Key}, ca.Cert, testNow, `want "beta"`},
		{"expired", cred, ca.Cert, testNow.Add(DefaultNodeValidity + time.Hour), "expired"},
		{"not yet valid", cred, ca.Cert, testNow.Add(-time.Hour), "expired or is not yet valid"},
		{"missing key", &Credential{Name: "alpha", Cert: cred.Cert}, ca.Cert, testNow, "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			err := tt.cred.Check(tt.ca, tt.now)
			if err == nil || !errors.Is(err, ErrBadCredential) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v, want ErrBadCredential containing %q", err, tt.want)
			}
		})
	}
}

func TestIssueRefusals(t *testing.T) {
	ca, _ := newTestCA(t)
	if _, err := ca.Issue("Bad_Name", testNow, 0); !errors.Is(err, ErrBadName) {
		t.Fatalf("Issue(bad name) = %v, want ErrBadName", err)
	}
	if _, err := ca.Issue("a", testNow, -time.Hour); err == nil {
		t.Fatal("Issue with negative validity succeeded")
	}
	certOnly := &CA{Cert: ca.Cert}
	if _, err := certOnly.Issue("a", testNow, 0); err == nil || !strings.Contains(err.Error(), "CA holder") {
		t.Fatalf("Issue without CA key = %v, want an error naming CA holders", err)
	}
	// A validity beyond the CA's end is clipped to it.
	c, err := ca.Issue("a", testNow.Add(DefaultCAValidity-time.Hour), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Fatalf("NotAfter = %v, want the CA's %v", c.Cert.NotAfter, ca.Cert.NotAfter)
	}
}

func TestPEM(t *testing.T) {
	ca, _ := newTestCA(t)
	cred := issue(t, ca, "alpha")
	certPEM := EncodeCertPEM(cred.Cert)
	keyPEM, err := EncodeKeyPEM(cred.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.Equal(cred.Cert) {
		t.Fatal("certificate changed in a PEM round trip")
	}
	key, err := ParseKeyPEM(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := samePublicKey(cert.PublicKey, key.Public()); err != nil {
		t.Fatalf("key changed in a PEM round trip: %v", err)
	}

	bad := []struct {
		desc string
		in   []byte
		want string
		key  bool
	}{
		{"empty", nil, "no PEM block", false},
		{"garbage", []byte("hello"), "no PEM block", false},
		{"key as cert", keyPEM, `want "CERTIFICATE"`, false},
		{"cert as key", certPEM, `want "PRIVATE KEY"`, true},
		{"two certs", append(append([]byte{}, certPEM...), certPEM...), "more than one", false},
		{"huge", bytes.Repeat([]byte{'a'}, maxPEM+1), "limit", false},
	}
	for _, tt := range bad {
		t.Run(tt.desc, func(t *testing.T) {
			var err error
			if tt.key {
				_, err = ParseKeyPEM(tt.in)
			} else {
				_, err = ParseCertPEM(tt.in)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// FuzzParsePEM checks that the certificate and key readers never panic
// and that a key they accept re-encodes to one they accept.
func FuzzParsePEM(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseCertPEM(data)
		k, err := ParseKeyPEM(data)
		if err != nil {
			return
		}
		enc, err := EncodeKeyPEM(k)
		if err != nil {
			t.Fatalf("accepted key does not encode: %v", err)
		}
		if _, err := ParseKeyPEM(enc); err != nil {
			t.Fatalf("re-encoded key does not parse: %v", err)
		}
	})
}
