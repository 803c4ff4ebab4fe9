package mtls

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// allowList is an Authorizer admitting a fixed set of names.
type allowList map[string]bool

func (a allowList) Authorize(name string, _ *x509.Certificate) error {
	if !a[name] {
		return fmt.Errorf("%w: %q is not enrolled", ErrUnauthorized, name)
	}
	return nil
}

// handshake runs one TLS handshake over TCP loopback and returns the errors
// of the server and client sides.
func handshake(t *testing.T, server, client *tls.Config) (serr, cerr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			serr = err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		serr = tc.Handshake()
		if serr == nil {
			// Tell the client it was accepted, then wait for it to close.
			_, _ = tc.Write([]byte("k"))
			_, _ = io.Copy(io.Discard, tc)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(c, client)
	cerr = tc.Handshake()
	if cerr == nil {
		// In TLS 1.3 the client finishes before the server checks its
		// certificate: reading the server's first byte surfaces its alert.
		var b [1]byte
		if _, err := tc.Read(b[:]); err != nil {
			cerr = err
		}
	}
	tc.Close()
	wg.Wait()
	return serr, cerr
}

func TestTLSHandshake(t *testing.T) {
	ca, _ := newTestCA(t)
	otherCA, _ := newTestCA(t)
	alpha, beta := issue(t, ca, "alpha"), issue(t, ca, "beta")
	intruder := issue(t, otherCA, "beta") // right name, wrong CA
	gamma := issue(t, ca, "gamma")        // right CA, not enrolled
	serverOnly := issueServerOnly(t, ca, "beta")
	now := func() time.Time { return testNow }

	var refused []string
	serverCfg := &Config{Credential: alpha, CA: ca.Cert, Authorizer: allowList{"beta": true}, Time: now,
		Refused: func(claimed string, err error) { refused = append(refused, claimed) }}
	clientCfg := func(c *Credential, trust *x509.Certificate) *Config {
		return &Config{Credential: c, CA: trust, Authorizer: allowList{"alpha": true}, Time: now}
	}
	tests := []struct {
		desc       string
		client     *Config
		dial       string
		mutate     func(c *tls.Config)
		serverWant string // substring of the server's error; "" means success
		clientWant string
		claimed    string // the name Refused must report, when the refusal happens in VerifyConnection
	}{
		{desc: "enrolled peer", client: clientCfg(beta, ca.Cert), dial: "alpha"},
		{desc: "other CA", client: clientCfg(intruder, ca.Cert), dial: "alpha", serverWant: "unknown authority", claimed: "beta"},
		{desc: "client trusts other CA", client: clientCfg(beta, otherCA.Cert), dial: "alpha", clientWant: "unknown authority"},
		{desc: "not enrolled", client: clientCfg(gamma, ca.Cert), dial: "alpha", serverWant: `"gamma" is not enrolled`, claimed: "gamma"},
		{desc: "dialed wrong name", client: clientCfg(beta, ca.Cert), dial: "delta", clientWant: "not delta"},
		{desc: "TLS 1.2", client: clientCfg(beta, ca.Cert), dial: "alpha",
			mutate: func(c *tls.Config) { c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12 }, serverWant: "version"},
		{desc: "no client certificate", client: clientCfg(beta, ca.Cert), dial: "alpha",
			mutate: func(c *tls.Config) { c.Certificates = nil }, serverWant: "certificate"},
		{desc: "server-only certificate", client: clientCfg(beta, ca.Cert), dial: "alpha",
			mutate: func(c *tls.Config) {
				cert := serverOnly.TLSCertificate()
				c.Certificates = []tls.Certificate{cert}
			}, serverWant: "incompatible key usage", claimed: "beta"},
		{desc: "other ALPN", client: clientCfg(beta, ca.Cert), dial: "alpha",
			mutate: func(c *tls.Config) { c.NextProtos = []string{"h2"} }, serverWant: "protocol"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			sc, err := serverCfg.Server()
			if err != nil {
				t.Fatal(err)
			}
			cc, err := tt.client.Client(tt.dial)
			if err != nil {
				t.Fatal(err)
			}
			if tt.mutate != nil {
				tt.mutate(cc)
			}
			refused = nil
			serr, cerr := handshake(t, sc, cc)
			check := func(side string, err error, want string) {
				t.Helper()
				switch {
				case want == "" && err != nil:
					t.Errorf("%s: got %v, want success", side, err)
				case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
					t.Errorf("%s: got %v, want an error containing %q", side, err, want)
				}
			}
			switch {
			case tt.serverWant != "":
				check("server", serr, tt.serverWant)
				if tt.claimed != "" && (len(refused) != 1 || refused[0] != tt.claimed) {
					t.Errorf("Refused calls %q, want one naming %q", refused, tt.claimed)
				}
				if cerr == nil {
					t.Errorf("client: handshake succeeded although the server refused it (%v)", serr)
				}
			case tt.clientWant != "":
				check("client", cerr, tt.clientWant)
				if serr == nil {
					t.Errorf("server: handshake succeeded although the client refused it (%v)", cerr)
				}
			default:
				check("server", serr, "")
				check("client", cerr, "")
			}
		})
	}
}

func TestConfigRefusesIncomplete(t *testing.T) {
	ca, _ := newTestCA(t)
	cred := issue(t, ca, "alpha")
	for _, c := range []*Config{{CA: ca.Cert}, {Credential: cred}} {
		if _, err := c.Server(); err == nil {
			t.Errorf("Server() of %+v succeeded, want an error", c)
		}
		if _, err := c.Client("beta"); err == nil {
			t.Errorf("Client() of %+v succeeded, want an error", c)
		}
	}
	c := &Config{Credential: cred, CA: ca.Cert}
	if _, err := c.Client("Not A Name"); !errors.Is(err, ErrBadName) {
		t.Errorf("Client(bad name) = %v, want ErrBadName", err)
	}
}

// issueServerOnly issues a certificate without client authentication, which
// the server must refuse as a client certificate.
func issueServerOnly(t *testing.T, ca *CA, name string) *Credential {
	t.Helper()
	c := issue(t, ca, name)
	tmpl := *c.Cert
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.Cert, c.Key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Credential{Name: name, Cert: cert, Key: c.Key}
}
