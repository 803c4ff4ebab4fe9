// Package clustertest builds real clusters for tests: data directories in
// temporary directories, a CA holder that ran cluster.Init and nodes that
// joined with bundles it enrolled, all admitting each other.
//
// # Use
//
// New(t, "alpha", "beta") returns the nodes, alpha the CA holder; Admit
// records a peer's address once a listener has one; Foreign makes a node
// of another cluster, whose certificate no member accepts.
package clustertest
