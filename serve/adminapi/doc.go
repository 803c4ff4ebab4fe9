// Package adminapi is the operator interface to a store, spoken in two
// ways that give the same answers: directly (Local, over an open
// *store.Store) and over HTTP (Client, to a running `muser serve` whose
// admin endpoint under /admin/v1/ calls Local on the store it owns).
//
// # Why
//
// A store has one writer. While `muser serve` holds it, the pack and
// receipts commands cannot open it themselves; they find the server
// through the serve file it writes into its home (ServeFile) and ask it
// instead. Because both ways return the same values, the commands render
// one set of types and print the same output either way, and errors carry
// the same sentinels (store.ErrNotFound, pack.ErrRefused, ...) so that
// the same exit codes follow.
//
// # Wire format
//
// Requests and answers are JSON; the types here are the bodies. An error
// is {"error":{"code":C,"message":M,"status":S}} where C is one of the
// Code constants and M the error's text as the direct path prints it.
// docs/serve.md ("Admin endpoint") lists the routes.
package adminapi
