package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/muserhq/muser/net/mtls"
)

// Peer is one entry of a node's registry.
type Peer struct {
	// Name is the peer's node name, as its certificate carries it.
	Name string `json:"name"`
	// Addr is the host:port of the peer's replication listener; empty when
	// this node only accepts connections from the peer and never dials it.
	Addr string `json:"addr,omitempty"`
	// Added is when the peer was (last) added or readmitted.
	Added time.Time `json:"added"`
	// Removed is when `muser node rm` removed the peer; zero while active.
	Removed time.Time `json:"removed,omitzero"`
	// RevokedBefore, when not zero, refuses every certificate for this name
	// whose NotBefore is not after it: set when a removed peer is
	// readmitted, so only a certificate issued after the removal works.
	RevokedBefore time.Time `json:"revoked_before,omitzero"`
}

// Active reports whether the peer is admitted (not removed).
func (p *Peer) Active() bool { return p.Removed.IsZero() }

// registryVersion is the version of the peers.json layout.
const registryVersion = 1

// Limits of peers.json.
const (
	// MaxPeers bounds the number of registry entries.
	MaxPeers = 4096
	// maxRegistryBytes bounds the size of peers.json.
	maxRegistryBytes = 4 << 20
	// maxAddrLen bounds a peer address.
	maxAddrLen = 261 // a 253-byte host name, ':', a 5-digit port, brackets
)

// registryFile is the JSON layout of peers.json.
type registryFile struct {
	Version int    `json:"version"`
	Peers   []Peer `json:"peers"`
}

// ValidateAddr checks that addr is a host:port a peer can be dialed at.
func ValidateAddr(addr string) error {
	if len(addr) > maxAddrLen {
		return fmt.Errorf("address is %d bytes, the limit is %d", len(addr), maxAddrLen)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %v", addr, err)
	}
	if host == "" {
		return fmt.Errorf("address %q has no host", addr)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return fmt.Errorf("address %q: port %q is not 1..65535", addr, port)
	}
	return nil
}

// decodeRegistry parses peers.json strictly: known fields only, the
// current version, at most MaxPeers entries with valid, unique names and
// valid addresses.
func decodeRegistry(data []byte) ([]Peer, error) {
	if len(data) > maxRegistryBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrBadRegistry, len(data), maxRegistryBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f registryFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRegistry, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the registry object", ErrBadRegistry)
	}
	if f.Version != registryVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrBadRegistry, f.Version, registryVersion)
	}
	if len(f.Peers) > MaxPeers {
		return nil, fmt.Errorf("%w: %d peers, the limit is %d", ErrBadRegistry, len(f.Peers), MaxPeers)
	}
	seen := make(map[string]bool, len(f.Peers))
	for i := range f.Peers {
		p := &f.Peers[i]
		if err := mtls.ValidateName(p.Name); err != nil {
			return nil, fmt.Errorf("%w: peer %d: %v", ErrBadRegistry, i, err)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("%w: peer %q listed twice", ErrBadRegistry, p.Name)
		}
		seen[p.Name] = true
		if p.Addr != "" {
			if err := ValidateAddr(p.Addr); err != nil {
				return nil, fmt.Errorf("%w: peer %q: %v", ErrBadRegistry, p.Name, err)
			}
		}
	}
	if f.Peers == nil {
		f.Peers = []Peer{}
	}
	return f.Peers, nil
}

// encodeRegistry is the inverse of decodeRegistry; peers come out sorted by
// name.
func encodeRegistry(peers []Peer) ([]byte, error) {
	sorted := slices.Clone(peers)
	sortPeers(sorted)
	if sorted == nil {
		sorted = []Peer{}
	}
	out, err := json.MarshalIndent(registryFile{Version: registryVersion, Peers: sorted}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func sortPeers(p []Peer) {
	slices.SortFunc(p, func(a, b Peer) int { return strings.Compare(a.Name, b.Name) })
}
