// Package dashboard is the web dashboard `muser serve` answers at `/`: a
// page of plain HTML, CSS and JavaScript embedded in the binary (no build
// step, no framework, no network), and the JSON state it polls.
//
// # What it serves
//
// Handler serves the page under /dashboard/ and the state at
// /dashboard/api/state; the server routes `GET /` to Index for a browser
// (a request that accepts text/html) and answers Ollama's probe text
// otherwise.
//
// # Honesty tags
//
// Every number in the state is a Figure tagged measured (by this process,
// with the window it covers), configured (a flag or option, with its
// source), or unavailable (with the reason). The page shows the tag and
// never makes a number up: the tags are decided here, in Go, not in the
// page.
//
// # Where the numbers come from
//
// A Recorder implements sched.Observer and keeps 5-second buckets over the
// last ten minutes (the charts: time to first token, decode tokens per
// second, cache hit rate), totals since start, and the last finished
// requests. The Store tab reads the store's ledger (packs, stats,
// receipts); the Nodes tab reads Config.Cluster, which `muser serve` fills
// in from its replication node; without it the node is shown as not in a
// cluster.
package dashboard
