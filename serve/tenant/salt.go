package tenant

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/zeebo/blake3"
)

// SecretFile is the name of the server secret in the data directory.
const SecretFile = "serve.key"

// SecretLen is the length of the server secret in bytes.
const SecretLen = 32

// MaxCacheSalt bounds a request's cache_salt, in bytes.
const MaxCacheSalt = 1024

// saltDomain separates tenant salts from every other use of BLAKE3.
const saltDomain = "muser/serve/tenant-salt/v1"

// Salter derives tenants' cache salts from the server secret.
type Salter struct {
	secret [SecretLen]byte
}

// NewSalter returns a Salter for a secret of SecretLen bytes.
func NewSalter(secret []byte) (*Salter, error) {
	if len(secret) != SecretLen {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrSecret, len(secret), SecretLen)
	}
	s := &Salter{}
	copy(s.secret[:], secret)
	return s, nil
}

// LoadSecret reads the server secret from dir/serve.key, creating it (32
// random bytes, mode 0600) if it does not exist. A secret file that group
// or others may access, or of the wrong size, is an error.
func LoadSecret(dir string) (*Salter, error) {
	path := filepath.Join(dir, SecretFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createSecret(dir, path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, &FileError{File: path, Err: ErrSecret, Msg: fmt.Sprintf("mode %04o lets group or others read the secret; chmod 600 it", perm)}
	}
	var b [SecretLen + 1]byte
	n, err := io.ReadFull(f, b[:])
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, &FileError{File: path, Err: ErrSecret, Msg: fmt.Sprintf("cannot be read: %v", err)}
	}
	if n != SecretLen || err == nil {
		return nil, &FileError{File: path, Err: ErrSecret, Msg: fmt.Sprintf("holds %d bytes or more, want exactly %d", n, SecretLen)}
	}
	return NewSalter(b[:SecretLen])
}

// createSecret writes a new secret atomically: a temporary file, fsync,
// rename, fsync of the directory.
func createSecret(dir, path string) (*Salter, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var secret [SecretLen]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-serve-key-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, err
	}
	if _, err := tmp.Write(secret[:]); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	// Link rather than rename so that two servers racing to create the
	// secret agree on one: the loser reads the winner's.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return LoadSecret(dir)
		}
		return nil, err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return NewSalter(secret[:])
}

// clusterSecretContext is the BLAKE3 key-derivation context of
// ClusterSecret: it separates the tenant secret from the link secret's own
// use (sealing replication offers).
const clusterSecretContext = "muser 2026-12 serve tenant secret from cluster link secret v1"

// ClusterSecret derives the server secret of a node that belongs to a
// cluster from the cluster's link secret (BLAKE3 in key-derivation mode,
// with its own context string). Every node of a cluster derives the same
// secret, so the same tenant gets the same cache salt on every node and
// packs replicated between them serve each other's prefix hits, while
// tenants stay salted apart and a host outside the cluster cannot compute
// the salts.
func ClusterSecret(linkSecret []byte) []byte {
	out := make([]byte, SecretLen)
	blake3.DeriveKey(clusterSecretContext, linkSecret, out)
	return out
}

// Salt returns the cache salt of tenant with the request's optional
// cacheSalt (empty when the request has none). Distinct (tenant,
// cacheSalt) pairs give distinct salts.
func (s *Salter) Salt(tenant, cacheSalt string) []byte {
	h, _ := blake3.NewKeyed(s.secret[:])
	var n [8]byte
	for _, part := range []string{saltDomain, tenant, cacheSalt} {
		binary.LittleEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.WriteString(part)
	}
	return h.Sum(nil)
}
