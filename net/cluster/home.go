package cluster

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/muserhq/muser/net/mtls"
)

// File names inside the cluster directory.
const (
	infoFile     = "cluster.json"
	caCertFile   = "ca.crt"
	caKeyFile    = "ca.key"
	nodeCertFile = "node.crt"
	nodeKeyFile  = "node.key"
	linkFile     = "link.key"
	peersFile    = "peers.json"
	genFile      = "seal.gen"
	lockName     = "lock"
)

// infoVersion is the version of the cluster.json layout.
const infoVersion = 1

// Info describes this node's cluster membership (cluster.json).
type Info struct {
	// Version is the layout version of cluster.json.
	Version int `json:"version"`
	// ClusterID is the cluster's ID, hex-encoded.
	ClusterID string `json:"cluster_id"`
	// Name is this node's name.
	Name string `json:"name"`
	// Created is when this node initialized or joined the cluster.
	Created time.Time `json:"created"`
}

// Home is a node's cluster directory, HOME/cluster. Its methods are safe
// for concurrent use; registry updates are serialized between processes by
// a file lock.
type Home struct {
	dir  string
	info Info

	mu       sync.Mutex
	regStat  fs.FileInfo
	regPeers map[string]Peer
	gen      *Generations
}

// Dir returns the cluster directory of a data directory.
func Dir(home string) string { return filepath.Join(home, "cluster") }

// Open opens the cluster directory of the data directory home. It returns
// an error wrapping ErrNotInitialized when there is none.
func Open(home string) (*Home, error) {
	dir := Dir(home)
	data, err := readFileMax(filepath.Join(dir, infoFile), 64<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w under %s: run 'muser cluster init' (first node) or 'muser node join BUNDLE'", ErrNotInitialized, home)
	}
	if err != nil {
		return nil, err
	}
	info, err := decodeInfo(data)
	if err != nil {
		return nil, &FileError{Path: filepath.Join(dir, infoFile), Err: err}
	}
	return &Home{dir: dir, info: info}, nil
}

func decodeInfo(data []byte) (Info, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var info Info
	if err := dec.Decode(&info); err != nil {
		return Info{}, fmt.Errorf("%w: %v", ErrBadRegistry, err)
	}
	if info.Version != infoVersion {
		return Info{}, fmt.Errorf("%w: version %d, want %d", ErrBadRegistry, info.Version, infoVersion)
	}
	if err := mtls.ValidateName(info.Name); err != nil {
		return Info{}, fmt.Errorf("%w: %v", ErrBadRegistry, err)
	}
	if b, err := hex.DecodeString(info.ClusterID); err != nil || len(b) != mtls.ClusterIDLen {
		return Info{}, fmt.Errorf("%w: cluster ID %q is not %d hex-encoded bytes", ErrBadRegistry, info.ClusterID, mtls.ClusterIDLen)
	}
	return info, nil
}

// Init creates the cluster directory of a first node called name: a new
// cluster CA (this node becomes a CA holder), this node's credential, a
// random link secret and an empty registry. The directory appears whole or
// not at all. It returns an error wrapping ErrInitialized if the data
// directory already has one.
func Init(home, name string, now time.Time) (*Home, error) {
	if err := mtls.ValidateName(name); err != nil {
		return nil, err
	}
	id, err := mtls.NewClusterID()
	if err != nil {
		return nil, err
	}
	ca, err := mtls.NewCA(id, now)
	if err != nil {
		return nil, err
	}
	cred, err := ca.Issue(name, now, mtls.DefaultCAValidity)
	if err != nil {
		return nil, err
	}
	var secret [mtls.LinkSecretLen]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, fmt.Errorf("cluster: link secret: %w", err)
	}
	caKey, err := mtls.EncodeKeyPEM(ca.Key)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{caKeyFile: caKey}
	return create(home, Info{Version: infoVersion, ClusterID: id, Name: name, Created: now.UTC()},
		ca.Cert, cred, secret, nil, files)
}

// Join creates the cluster directory of a new node from the bundle a CA
// holder made for it with Enroll. The bundle is checked first (its parts
// must belong together and be valid at now). The issuing node is added to
// the registry, without an address.
func Join(home string, b *mtls.Bundle, now time.Time) (*Home, error) {
	if err := b.Check(now); err != nil {
		return nil, err
	}
	if b.Issuer == b.Node.Name {
		return nil, fmt.Errorf("%w: the bundle names its issuer %q as the node itself", mtls.ErrBadCredential, b.Issuer)
	}
	peers := []Peer{{Name: b.Issuer, Added: now.UTC()}}
	return create(home, Info{Version: infoVersion, ClusterID: b.ClusterID, Name: b.Node.Name, Created: now.UTC()},
		b.CA, b.Node, b.LinkSecret, peers, nil)
}

// create writes a complete cluster directory in a temporary directory and
// renames it into place.
func create(home string, info Info, caCert *x509.Certificate, cred *mtls.Credential,
	secret [mtls.LinkSecretLen]byte, peers []Peer, extra map[string][]byte) (*Home, error) {
	dir := Dir(home)
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("%w in %s", ErrInitialized, dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(home, ".cluster.tmp*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // a no-op after the rename
	if err := os.Chmod(tmp, 0o700); err != nil {
		return nil, err
	}
	keyPEM, err := mtls.EncodeKeyPEM(cred.Key)
	if err != nil {
		return nil, err
	}
	infoJSON, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, err
	}
	reg, err := encodeRegistry(peers)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		infoFile:     append(infoJSON, '\n'),
		caCertFile:   mtls.EncodeCertPEM(caCert),
		nodeCertFile: mtls.EncodeCertPEM(cred.Cert),
		nodeKeyFile:  keyPEM,
		linkFile:     []byte(hex.EncodeToString(secret[:]) + "\n"),
		peersFile:    reg,
	}
	for k, v := range extra {
		files[k] = v
	}
	for name, data := range files {
		if err := writeFileAtomic(filepath.Join(tmp, name), data); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Lstat(dir); serr == nil {
			return nil, fmt.Errorf("%w in %s", ErrInitialized, dir)
		}
		return nil, err
	}
	if err := syncDir(home); err != nil {
		return nil, err
	}
	return &Home{dir: dir, info: info}, nil
}

// Info returns this node's cluster membership.
func (h *Home) Info() Info { return h.info }

// Name returns this node's name.
func (h *Home) Name() string { return h.info.Name }

// Path returns the cluster directory.
func (h *Home) Path() string { return h.dir }

// CAHolder reports whether this node holds the cluster CA's private key and
// so can enroll nodes.
func (h *Home) CAHolder() bool {
	_, err := os.Stat(filepath.Join(h.dir, caKeyFile))
	return err == nil
}

func (h *Home) file(name string) string { return filepath.Join(h.dir, name) }

func (h *Home) readPEMFile(name string) ([]byte, error) {
	data, err := readFileMax(h.file(name), 64<<10)
	if err != nil {
		return nil, err
	}
	return data, nil
}

// CA returns the cluster CA: its certificate, and its key on a CA holder.
func (h *Home) CA() (*mtls.CA, error) {
	data, err := h.readPEMFile(caCertFile)
	if err != nil {
		return nil, err
	}
	cert, err := mtls.ParseCertPEM(data)
	if err != nil {
		return nil, &FileError{Path: h.file(caCertFile), Err: err}
	}
	ca := &mtls.CA{Cert: cert}
	data, err = h.readPEMFile(caKeyFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ca, nil
	case err != nil:
		return nil, err
	}
	key, err := mtls.ParseKeyPEM(data)
	if err != nil {
		return nil, &FileError{Path: h.file(caKeyFile), Err: err}
	}
	ca.Key = key
	return ca, nil
}

// Credential returns this node's credential, checked against the CA at now.
func (h *Home) Credential(now time.Time) (*mtls.Credential, error) {
	ca, err := h.CA()
	if err != nil {
		return nil, err
	}
	data, err := h.readPEMFile(nodeCertFile)
	if err != nil {
		return nil, err
	}
	cert, err := mtls.ParseCertPEM(data)
	if err != nil {
		return nil, &FileError{Path: h.file(nodeCertFile), Err: err}
	}
	data, err = h.readPEMFile(nodeKeyFile)
	if err != nil {
		return nil, err
	}
	key, err := mtls.ParseKeyPEM(data)
	if err != nil {
		return nil, &FileError{Path: h.file(nodeKeyFile), Err: err}
	}
	cred := &mtls.Credential{Name: h.info.Name, Cert: cert, Key: key}
	if err := cred.Check(ca.Cert, now); err != nil {
		return nil, &FileError{Path: h.file(nodeCertFile), Err: err}
	}
	return cred, nil
}

// LinkSecret returns the cluster link secret.
func (h *Home) LinkSecret() ([mtls.LinkSecretLen]byte, error) {
	var s [mtls.LinkSecretLen]byte
	data, err := readFileMax(h.file(linkFile), 1024)
	if err != nil {
		return s, err
	}
	b, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(b) != len(s) {
		return s, &FileError{Path: h.file(linkFile), Err: fmt.Errorf("%w: want %d hex-encoded bytes", ErrBadRegistry, len(s))}
	}
	copy(s[:], b)
	if s == [mtls.LinkSecretLen]byte{} {
		return s, &FileError{Path: h.file(linkFile), Err: fmt.Errorf("%w: the link secret is all zero", ErrBadRegistry)}
	}
	return s, nil
}

// TLSConfig returns the mtls configuration of this node: its credential
// (checked at now), the cluster CA, and this Home as the Authorizer.
func (h *Home) TLSConfig(now time.Time) (*mtls.Config, error) {
	cred, err := h.Credential(now)
	if err != nil {
		return nil, err
	}
	ca, err := h.CA()
	if err != nil {
		return nil, err
	}
	return &mtls.Config{Credential: cred, CA: ca.Cert, Authorizer: h}, nil
}

// Enroll issues a credential for a new node called name (valid for
// validity, mtls.DefaultNodeValidity when zero) and returns its bundle.
// The name is added to this node's registry (without an address) so the
// new node can connect at once; a removed name is readmitted, but only with
// the new certificate. Enroll needs the CA key (ErrNotCAHolder otherwise).
// It is Issue, then Admit.
func (h *Home) Enroll(name string, now time.Time, validity time.Duration) (*mtls.Bundle, error) {
	b, err := h.Issue(name, now, validity)
	if err != nil {
		return nil, err
	}
	if err := h.Admit(name, now); err != nil {
		return nil, err
	}
	return b, nil
}

// Issue is Enroll without the registry: the bundle of a new credential
// for name, which this node refuses until Admit (with the same now) adds
// the name. A caller that must write the bundle somewhere first (muser
// node enroll) admits only once it is written, so a failed write changes
// nothing.
func (h *Home) Issue(name string, now time.Time, validity time.Duration) (*mtls.Bundle, error) {
	if err := mtls.ValidateName(name); err != nil {
		return nil, err
	}
	if name == h.info.Name {
		return nil, fmt.Errorf("cannot enroll %q: it is this node's own name", name)
	}
	ca, err := h.CA()
	if err != nil {
		return nil, err
	}
	if ca.Key == nil {
		return nil, fmt.Errorf("%w: %s has no %s; enroll on the node that ran 'muser cluster init'", ErrNotCAHolder, h.dir, caKeyFile)
	}
	secret, err := h.LinkSecret()
	if err != nil {
		return nil, err
	}
	cred, err := ca.Issue(name, now, validity)
	if err != nil {
		return nil, err
	}
	return &mtls.Bundle{ClusterID: h.info.ClusterID, Node: cred, Issuer: h.info.Name, CA: ca.Cert, LinkSecret: secret}, nil
}

// Admit adds name to the registry (without an address), or readmits a
// removed name with only certificates issued from now on accepted.
func (h *Home) Admit(name string, now time.Time) error {
	return h.update(func(peers map[string]Peer) error {
		p, ok := peers[name]
		switch {
		case !ok:
			p = Peer{Name: name, Added: now.UTC()}
		case !p.Active():
			p = readmit(p, now)
		}
		peers[name] = p
		return nil
	})
}

func readmit(p Peer, now time.Time) Peer {
	p.RevokedBefore = p.Removed
	p.Removed = time.Time{}
	p.Added = now.UTC()
	return p
}

// AddPeer adds the node called name at addr (host:port of its replication
// listener) to the registry, or updates its address; an empty addr admits
// the node and leaves its address as it was. A removed node is readmitted,
// but only with a certificate issued after its removal.
func (h *Home) AddPeer(name, addr string, now time.Time) (Peer, error) {
	if err := mtls.ValidateName(name); err != nil {
		return Peer{}, err
	}
	if name == h.info.Name {
		return Peer{}, fmt.Errorf("cannot add %q: it is this node's own name", name)
	}
	if addr != "" {
		if err := ValidateAddr(addr); err != nil {
			return Peer{}, err
		}
	}
	var out Peer
	err := h.update(func(peers map[string]Peer) error {
		p, ok := peers[name]
		switch {
		case !ok:
			p = Peer{Name: name, Added: now.UTC()}
		case !p.Active():
			p = readmit(p, now)
		}
		if addr != "" {
			p.Addr = addr
		}
		peers[name] = p
		out = p
		return nil
	})
	return out, err
}

// RemovePeer marks the node called name removed: its connections are
// refused from then on. Removing a removed node changes nothing. It returns
// an error wrapping ErrNodeNotFound if the name is not in the registry.
func (h *Home) RemovePeer(name string, now time.Time) (Peer, error) {
	var out Peer
	err := h.update(func(peers map[string]Peer) error {
		p, ok := peers[name]
		if !ok {
			return fmt.Errorf("%w: %q is not in the registry of %s", ErrNodeNotFound, name, h.info.Name)
		}
		if p.Active() {
			p.Removed = now.UTC()
			peers[name] = p
		}
		out = p
		return nil
	})
	return out, err
}

// Peers returns the registry, sorted by name, removed peers included.
func (h *Home) Peers() ([]Peer, error) {
	m, err := h.load()
	if err != nil {
		return nil, err
	}
	out := make([]Peer, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	sortPeers(out)
	return out, nil
}

// Peer returns the registry entry of the node called name, or an error
// wrapping ErrNodeNotFound.
func (h *Home) Peer(name string) (Peer, error) {
	m, err := h.load()
	if err != nil {
		return Peer{}, err
	}
	p, ok := m[name]
	if !ok {
		return Peer{}, fmt.Errorf("%w: %q is not in the registry of %s (see 'muser node ls')", ErrNodeNotFound, name, h.info.Name)
	}
	return p, nil
}

// Authorize implements mtls.Authorizer: the node called name is admitted
// when it is in the registry, not removed, and cert was issued after any
// earlier removal. The registry is re-read when the file changes, so
// `muser node rm` in another process takes effect at the next handshake.
// An unreadable registry refuses everyone.
func (h *Home) Authorize(name string, cert *x509.Certificate) error {
	m, err := h.load()
	if err != nil {
		return fmt.Errorf("%w: registry unreadable: %v", mtls.ErrUnauthorized, err)
	}
	p, ok := m[name]
	switch {
	case !ok:
		return fmt.Errorf("%w: %q is not enrolled on %s (muser node add)", mtls.ErrUnauthorized, name, h.info.Name)
	case !p.Active():
		return fmt.Errorf("%w: %q was removed from %s at %s", mtls.ErrUnauthorized, name, h.info.Name, p.Removed.Format(time.RFC3339))
	case !p.RevokedBefore.IsZero() && !cert.NotBefore.After(p.RevokedBefore):
		return fmt.Errorf("%w: %q presents a certificate issued %s, before its removal at %s; enroll it again",
			mtls.ErrUnauthorized, name, cert.NotBefore.Format(time.RFC3339), p.RevokedBefore.Format(time.RFC3339))
	}
	return nil
}

// load returns the registry, re-reading peers.json only when it changed.
func (h *Home) load() (map[string]Peer, error) {
	path := h.file(peersFile)
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.regStat != nil && os.SameFile(h.regStat, st) && h.regStat.Size() == st.Size() && h.regStat.ModTime().Equal(st.ModTime()) {
		return h.regPeers, nil
	}
	m, err := readRegistry(path)
	if err != nil {
		return nil, err
	}
	h.regStat, h.regPeers = st, m
	return m, nil
}

func readRegistry(path string) (map[string]Peer, error) {
	data, err := readFileMax(path, maxRegistryBytes)
	if err != nil {
		return nil, err
	}
	list, err := decodeRegistry(data)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	m := make(map[string]Peer, len(list))
	for _, p := range list {
		m[p.Name] = p
	}
	return m, nil
}

// update runs f on the registry under the cross-process lock and writes
// the result atomically.
func (h *Home) update(f func(peers map[string]Peer) error) error {
	unlock, err := lockFile(h.file(lockName))
	if err != nil {
		return err
	}
	defer unlock()
	m, err := readRegistry(h.file(peersFile))
	if err != nil {
		return err
	}
	if err := f(m); err != nil {
		return err
	}
	// The limit decodeRegistry enforces: a registry beyond it could not
	// be read back, and every handshake would be refused.
	if len(m) > MaxPeers {
		return fmt.Errorf("%w: it holds %d peers, the limit", ErrRegistryFull, MaxPeers)
	}
	list := make([]Peer, 0, len(m))
	for _, p := range m {
		list = append(list, p)
	}
	data, err := encodeRegistry(list)
	if err != nil {
		return err
	}
	return writeFileAtomic(h.file(peersFile), data)
}
