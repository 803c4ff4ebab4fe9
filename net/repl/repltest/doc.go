// Package repltest provides a prefill producer for tests of replication and
// disaggregated prefill before the engine is wired in: it publishes
// synthetic KV through the store's public API, as an engine would.
//
// # Faulty producers
//
// SyntheticPrefiller.Answer lets a test make the producer publish a pack
// with another identity or other tokens than requested, to check that
// consumers refuse it.

package repltest
