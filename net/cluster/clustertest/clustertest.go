package clustertest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/net/mtls"
)

// Node is one member of a test cluster.
type Node struct {
	// Name is the node's name.
	Name string
	// Home is the node's data directory.
	Home string
	// Cluster is the node's cluster directory.
	Cluster *cluster.Home
}

// TLS returns the node's mtls configuration at the current time.
func (n *Node) TLS(t testing.TB) *mtls.Config {
	t.Helper()
	c, err := n.Cluster.TLSConfig(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// New creates a cluster of the named nodes (the first is the CA holder)
// under t.TempDir(). Every node's registry admits every other node, without
// addresses; use AddPeer once listeners have them.
func New(t testing.TB, names ...string) []*Node {
	t.Helper()
	if len(names) == 0 {
		t.Fatal("clustertest.New: no names")
	}
	root := t.TempDir()
	now := time.Now()
	first := &Node{Name: names[0], Home: filepath.Join(root, names[0])}
	h, err := cluster.Init(first.Home, first.Name, now)
	if err != nil {
		t.Fatal(err)
	}
	first.Cluster = h
	nodes := []*Node{first}
	for _, name := range names[1:] {
		b, err := h.Enroll(name, now, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := &Node{Name: name, Home: filepath.Join(root, name)}
		if n.Cluster, err = cluster.Join(n.Home, b, now); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	// Joined nodes know only the CA holder; introduce them to each other.
	for _, a := range nodes[1:] {
		for _, b := range nodes[1:] {
			if a != b {
				Admit(t, a, b.Name, "")
			}
		}
	}
	return nodes
}

// Admit adds peer to n's registry at addr; an empty addr admits it
// without changing its address.
func Admit(t testing.TB, n *Node, peer, addr string) {
	t.Helper()
	if _, err := n.Cluster.AddPeer(peer, addr, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// Foreign creates a single-node cluster (its own CA) with a node called
// name: a stranger whose certificate no node of another cluster accepts.
func Foreign(t testing.TB, name string) *Node {
	t.Helper()
	n := &Node{Name: name, Home: filepath.Join(t.TempDir(), name)}
	h, err := cluster.Init(n.Home, name, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n.Cluster = h
	return n
}
