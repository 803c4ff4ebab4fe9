package tenant

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/zeebo/blake3"
)

// Limits on API key files.
const (
	// MaxFileBytes is the largest API key file accepted.
	MaxFileBytes = 1 << 20
	// MaxKeys is the most keys one file may hold.
	MaxKeys = 10000
	// MinKeyLen and MaxKeyLen bound a key's length in bytes.
	MinKeyLen, MaxKeyLen = 16, 256
	// MaxTenantLen bounds a tenant name's length in bytes.
	MaxTenantLen = 64
)

// Local is the tenant of every request when the server runs without API
// keys (bound to loopback).
const Local = "local"

// Keys maps API keys to tenants. It holds keyed hashes of the keys, never
// the keys themselves. Its methods are safe for concurrent use.
type Keys struct {
	hashKey [32]byte
	entries []entry
	tenants map[string]bool
}

type entry struct {
	hash   [32]byte
	tenant string
}

// LoadKeys reads the API key file at path (see the package
// documentation), refusing one whose mode lets group or others read or
// write it.
func LoadKeys(path string) (*Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &FileError{File: path, Msg: "is not a regular file", Err: ErrKeyFile}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, &FileError{File: path, Err: ErrKeyFile,
			Msg: fmt.Sprintf("mode %04o lets group or others access the keys; chmod 600 it", perm)}
	}
	if fi.Size() > MaxFileBytes {
		return nil, &FileError{File: path, Err: ErrKeyFile, Msg: fmt.Sprintf("is %d bytes, more than the %d allowed", fi.Size(), MaxFileBytes)}
	}
	return ParseKeys(f, path)
}

// ParseKeys parses an API key file's text from r; name is used in errors.
func ParseKeys(r io.Reader, name string) (*Keys, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > MaxFileBytes {
		return nil, &FileError{File: name, Err: ErrKeyFile, Msg: fmt.Sprintf("is more than %d bytes", MaxFileBytes)}
	}
	k := &Keys{tenants: make(map[string]bool)}
	if _, err := rand.Read(k.hashKey[:]); err != nil {
		return nil, err
	}
	seen := make(map[[32]byte]int)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxFileBytes)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		bad := func(format string, a ...any) error {
			return &FileError{File: name, Line: line, Msg: fmt.Sprintf(format, a...), Err: ErrKeyFile}
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			return nil, bad("want \"KEY TENANT\", got %d fields", len(fields))
		}
		key, tenant := fields[0], fields[1]
		if err := checkKey(key); err != nil {
			return nil, bad("key: %v", err)
		}
		if err := CheckTenant(tenant); err != nil {
			return nil, bad("tenant: %v", err)
		}
		if len(k.entries) == MaxKeys {
			return nil, bad("more than %d keys", MaxKeys)
		}
		h := k.hash(key)
		if first, dup := seen[h]; dup {
			return nil, bad("the key on line %d appears again", first)
		}
		seen[h] = line
		k.entries = append(k.entries, entry{hash: h, tenant: tenant})
		k.tenants[tenant] = true
	}
	if err := sc.Err(); err != nil {
		return nil, &FileError{File: name, Line: line + 1, Err: ErrKeyFile, Msg: err.Error()}
	}
	if len(k.entries) == 0 {
		return nil, &FileError{File: name, Err: ErrKeyFile, Msg: "holds no keys"}
	}
	return k, nil
}

func (k *Keys) hash(key string) [32]byte {
	h, _ := blake3.NewKeyed(k.hashKey[:])
	h.WriteString(key)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Lookup returns the tenant of key. It hashes key and compares the hash
// with every entry in constant time, whether or not one matches.
func (k *Keys) Lookup(key string) (tenant string, ok bool) {
	if len(key) < MinKeyLen || len(key) > MaxKeyLen {
		return "", false
	}
	h := k.hash(key)
	found := -1
	for i := range k.entries {
		eq := subtle.ConstantTimeCompare(h[:], k.entries[i].hash[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return "", false
	}
	return k.entries[found].tenant, true
}

// Len returns the number of keys.
func (k *Keys) Len() int { return len(k.entries) }

// Tenants returns the number of distinct tenants.
func (k *Keys) Tenants() int { return len(k.tenants) }

func checkKey(key string) error {
	if len(key) < MinKeyLen || len(key) > MaxKeyLen {
		return fmt.Errorf("is %d characters, want %d to %d", len(key), MinKeyLen, MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !isAlnum(c) && !strings.ContainsRune("-._~+/=", rune(c)) {
			return fmt.Errorf("character %d (%q) is not one of A-Z a-z 0-9 - . _ ~ + / =", i+1, c)
		}
	}
	return nil
}

// CheckTenant reports whether name is a valid tenant name.
func CheckTenant(name string) error {
	if name == "" || len(name) > MaxTenantLen {
		return fmt.Errorf("%q is %d characters, want 1 to %d", name, len(name), MaxTenantLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) && !strings.ContainsRune("-._@", rune(c)) {
			return fmt.Errorf("%q: character %d (%q) is not one of A-Z a-z 0-9 - . _ @", name, i+1, c)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
