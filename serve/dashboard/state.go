package dashboard

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/store"
)

// Limits of the lists in the state.
const (
	// MaxPacks is the most packs the Store tab lists (most recently used
	// first).
	MaxPacks = 200
	// MaxReceipts is the most receipts the Receipts tab lists (newest
	// first).
	MaxReceipts = 100
)

// Setting is one configured value (a flag or an option) the dashboard
// shows, tagged configured.
type Setting struct {
	// Name is what the page calls it.
	Name string
	// Value is its value; Unit its unit.
	Value float64
	Unit  string
	// Source is the flag or option that set it.
	Source string
}

// Config is what the dashboard reads. Store, Recorder and Identity are
// required; the rest may be left zero.
type Config struct {
	// Store is the server's store.
	Store *store.Store
	// Recorder receives the scheduler's measurements.
	Recorder *Recorder
	// Identity is the pack identity the server restores and publishes
	// under.
	Identity pack.Identity
	// Model names the served model; Version the build.
	Model, Version string
	// Slots and QueueDepth read the scheduler's live state.
	Slots      func() []sched.SlotInfo
	QueueDepth func() int
	// Settings returns the configured values shown in the Inference tab.
	Settings func() []Setting
	// Cluster, when set, reports the node's cluster, peers, replication
	// and producer; it returns nil when the node is not in a cluster.
	Cluster func() *ClusterState
	// Allow, when set, decides who may read the state (the page itself
	// holds no data): it returns an error to refuse a request with 401.
	Allow func(r *http.Request) error
}

// ClusterState is the Nodes tab: what `muser serve` knows of its cluster.
type ClusterState struct {
	// ClusterID and Node name the cluster and this node.
	ClusterID string `json:"cluster_id"`
	Node      string `json:"node"`
	// ReplAddr is the replication listener's address ("" when none).
	ReplAddr string `json:"repl_addr"`
	// Role is "producer" or "".
	Role string `json:"role"`
	// Peers are the enrolled peers.
	Peers []PeerState `json:"peers"`
	// Producer is the --prefill-node this node consumes from, if any.
	Producer *ProducerState `json:"producer"`
}

// PeerState is one peer of the registry, with its replication figures when
// this node replicates to it.
type PeerState struct {
	Name   string    `json:"name"`
	Addr   string    `json:"addr"`
	Active bool      `json:"active"`
	Added  time.Time `json:"added"`
	// ReplicateTo is set when this node pushes its packs to the peer
	// (--replicate-to); the figures below are then measured, else
	// unavailable.
	ReplicateTo bool   `json:"replicate_to"`
	Queue       Figure `json:"queue"`
	Pushed      Figure `json:"pushed"`
	Refused     Figure `json:"refused"`
	Retries     Figure `json:"retries"`
	Dropped     Figure `json:"dropped"`
	// LastPush is the last push attempt, nil before the first.
	LastPush *PushState `json:"last_push"`
}

// PushState is one push attempt to a peer.
type PushState struct {
	Time       time.Time `json:"time"`
	Pack       string    `json:"pack"`
	OK         bool      `json:"ok"`
	Error      string    `json:"error,omitempty"`
	Moved      int       `json:"moved_chunks"`
	Chunks     int       `json:"chunks"`
	MovedBytes int64     `json:"moved_bytes"`
	DurationMS float64   `json:"duration_ms"`
}

// ProducerState is the health of the prefill producer, as this node's
// requests found it.
type ProducerState struct {
	Name     string `json:"name"`
	Fallback string `json:"fallback"`
	// Outcomes counts requests by what the producer did for them
	// (remote, not_needed, fallback, failed), since start.
	Outcomes map[string]int `json:"outcomes"`
	// Last is the last outcome, LastTime when, LastError the producer's
	// error then (if any); all empty before the first request.
	Last      string    `json:"last"`
	LastTime  time.Time `json:"last_time,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// ListTag is the honesty tag of a table: every number in its rows is
// what Tag says, over Window, read from Source.
type ListTag struct {
	Tag    string `json:"tag"`
	Window string `json:"window"`
	Source string `json:"source"`
}

// State is the JSON of GET /dashboard/api/state.
type State struct {
	Time   time.Time         `json:"time"`
	Server ServerState       `json:"server"`
	Totals map[string]Figure `json:"totals"`
	Live   LiveState         `json:"live"`
	Series Series            `json:"series"`
	Recent []RequestSummary  `json:"recent"`
	// RecentTag tags Recent's numbers.
	RecentTag ListTag       `json:"recent_tag"`
	Store     StoreState    `json:"store"`
	Receipts  ReceiptsState `json:"receipts"`
	Nodes     NodesState    `json:"nodes"`
}

// ServerState names what is served, with the configured values.
type ServerState struct {
	Model       string            `json:"model"`
	Version     string            `json:"version"`
	IdentityKey string            `json:"identity_key"`
	Engine      string            `json:"engine"`
	Started     time.Time         `json:"started"`
	Uptime      Figure            `json:"uptime"`
	Settings    map[string]Figure `json:"settings"`
}

// LiveState is the scheduler now.
type LiveState struct {
	Queue Figure           `json:"queue"`
	Busy  Figure           `json:"slots_busy"`
	Slots []sched.SlotInfo `json:"slots"`
	// SlotsTag tags Slots' numbers.
	SlotsTag ListTag `json:"slots_tag"`
}

// StoreState is the Store tab.
type StoreState struct {
	Stats map[string]Figure `json:"stats"`
	// Packs lists at most MaxPacks packs, most recently used first;
	// Truncated says whether there were more.
	Packs     []PackRow `json:"packs"`
	PacksTag  ListTag   `json:"packs_tag"`
	Truncated bool      `json:"truncated"`
	// Error is set when the store could not be read.
	Error string `json:"error,omitempty"`
}

// PackRow is one pack of the Store tab.
type PackRow struct {
	ID          string    `json:"id"`
	Model       string    `json:"model"`
	Tokens      int       `json:"tokens"`
	Bytes       int64     `json:"bytes"`
	LastUse     time.Time `json:"last_use"`
	Created     time.Time `json:"created"`
	Pinned      bool      `json:"pinned"`
	Quarantined bool      `json:"quarantined"`
	Source      string    `json:"source"`
}

// ReceiptsState is the Receipts tab: refusals, newest first.
type ReceiptsState struct {
	Total     Figure          `json:"total"`
	List      []store.Receipt `json:"list"`
	ListTag   ListTag         `json:"list_tag"`
	Truncated bool            `json:"truncated"`
	// RefusedSinceStart counts restores refused since start by reason.
	RefusedSinceStart map[string]int `json:"refused_since_start"`
	Error             string         `json:"error,omitempty"`
}

// NodesState is the Nodes tab: Cluster is nil, and Reason says why, when
// the node is not in a cluster.
type NodesState struct {
	Tag string `json:"tag"`
	// Window says what the measured figures cover.
	Window  string        `json:"window,omitempty"`
	Reason  string        `json:"reason,omitempty"`
	Cluster *ClusterState `json:"cluster"`
}

// Snapshot builds the state now.
func (c *Config) Snapshot() State {
	rec := c.Recorder
	now := rec.now()
	rec.mu.Lock()
	t := rec.tot
	t.refused = copyCounts(rec.tot.refused)
	series := rec.series(now)
	recent := slices.Clone(rec.recent)
	started := rec.started
	rec.mu.Unlock()
	slices.Reverse(recent)

	since := "since start " + started.UTC().Format(time.RFC3339)
	st := State{Time: now.UTC(), Series: series, Recent: recent,
		RecentTag: ListTag{Tag: TagMeasured, Window: "each request, the last " + fmt.Sprint(recentLen), Source: "scheduler"}}
	st.Server = ServerState{Model: c.Model, Version: c.Version, IdentityKey: c.Identity.Key().String(),
		Engine: c.Identity.Engine, Started: started.UTC(),
		Uptime: Measured(now.Sub(started).Seconds(), "s", "now", "process clock"), Settings: map[string]Figure{}}
	var settings []Setting
	if c.Settings != nil {
		settings = c.Settings()
	}
	for _, s := range settings {
		st.Server.Settings[s.Name] = Configured(s.Value, s.Unit, s.Source)
	}

	tot := map[string]Figure{
		"requests":         Measured(float64(t.requests), "requests", since, "scheduler"),
		"prompt_tokens":    Measured(float64(t.promptTokens), "tokens", since, "scheduler"),
		"generated_tokens": Measured(float64(t.generated), "tokens", since, "scheduler"),
		"cached_tokens":    Measured(float64(t.cached), "tokens", since, "scheduler"),
		"cached_store":     Measured(float64(t.cachedStore), "tokens", since, "scheduler"),
		"cached_slot":      Measured(float64(t.cachedSlot), "tokens", since, "scheduler"),
		"publishes":        Measured(float64(t.publishes), "publishes", since, "publisher"),
		"publish_bytes":    Measured(float64(t.publishBytes), "bytes", since, "publisher"),
		"publish_errors":   Measured(float64(t.publishErrors), "publishes", since, "publisher"),
		"publish_dropped":  Measured(float64(t.publishDropped), "publishes", since, "publisher"),
	}
	if t.admittedPrompt > 0 {
		tot["hit_rate"] = Measured(float64(t.cached)/float64(t.admittedPrompt), "ratio", since, "scheduler: cached over prompt tokens of admitted requests")
	} else {
		tot["hit_rate"] = Unavailable("ratio", "no request admitted yet")
	}
	if t.ttftN > 0 {
		tot["ttft_mean"] = Measured(*msOf(t.ttftSum / time.Duration(t.ttftN)), "ms", since, "scheduler")
	} else {
		tot["ttft_mean"] = Unavailable("ms", "no request has produced a token yet")
	}
	if t.decodeTime > 0 {
		tot["decode_tokens_per_second"] = Measured(float64(t.decodeTokens)/t.decodeTime.Seconds(), "tokens/s", since, "scheduler")
	} else {
		tot["decode_tokens_per_second"] = Unavailable("tokens/s", "no request has decoded two tokens yet")
	}
	st.Totals = tot

	st.Live.Queue = Unavailable("requests", "the scheduler is not readable")
	st.Live.Busy = Unavailable("slots", "the scheduler is not readable")
	if c.QueueDepth != nil {
		st.Live.Queue = Measured(float64(c.QueueDepth()), "requests", "now", "scheduler")
	}
	if c.Slots != nil {
		st.Live.Slots = c.Slots()
		st.Live.SlotsTag = ListTag{Tag: TagMeasured, Window: "now", Source: "scheduler"}
		busy := 0
		for _, s := range st.Live.Slots {
			if s.Processing() {
				busy++
			}
		}
		st.Live.Busy = Measured(float64(busy), "slots", "now", "scheduler")
	}

	st.Store = c.storeState(t.cachedStore, since)
	st.Receipts = c.receiptsState(t.refused)
	st.Nodes = NodesState{Tag: TagUnavailable, Reason: "this node is not in a cluster (muser cluster init / muser node join)"}
	if c.Cluster != nil {
		if cs := c.Cluster(); cs != nil {
			st.Nodes = NodesState{Tag: TagMeasured, Cluster: cs,
				Window: "counters since start; the last push and the last outcome as they happened; the registry now"}
		}
	}
	return st
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// storeState reads the ledger: stats, packs, and the bytes saved by the
// store's cached tokens since start.
func (c *Config) storeState(cachedStore int, since string) StoreState {
	var ss StoreState
	ss.Stats = map[string]Figure{}
	stats, err := c.Store.Stats()
	if err != nil {
		ss.Error = fmt.Sprintf("store stats: %v", err)
		for _, k := range []string{"packs", "pinned", "quarantined", "chunks", "bytes"} {
			ss.Stats[k] = Unavailable("", ss.Error)
		}
	} else {
		const src = "store ledger"
		ss.Stats["packs"] = Measured(float64(stats.Packs), "packs", "now", src)
		ss.Stats["pinned"] = Measured(float64(stats.Pinned), "packs", "now", src)
		ss.Stats["quarantined"] = Measured(float64(stats.Quarantined), "packs", "now", src)
		ss.Stats["chunks"] = Measured(float64(stats.Chunks), "chunks", "now", src)
		ss.Stats["bytes"] = Measured(float64(stats.Bytes), "bytes", "now", src)
	}
	ss.Stats["block_tokens"] = Configured(float64(c.Store.BlockTokens()), "tokens", "the store's block size")
	packs, err := c.Store.Packs()
	if err != nil {
		ss.Error = fmt.Sprintf("store packs: %v", err)
		ss.Stats["bytes_saved"] = Unavailable("bytes", ss.Error)
		return ss
	}
	key := c.Identity.Key()
	// Every chunk of one identity holds one block's KV, so the bytes per
	// token of this identity's packs price the tokens the store served.
	var idBytes, idTokens int64
	for _, p := range packs {
		if p.IdentityKey == key && p.Tokens > 0 {
			idBytes += p.Bytes
			idTokens += int64(p.Tokens)
		}
	}
	if idTokens > 0 {
		ss.Stats["bytes_saved"] = Measured(float64(cachedStore)*float64(idBytes)/float64(idTokens), "bytes", since,
			"tokens restored from the store × KV bytes per token of this model's packs")
	} else {
		ss.Stats["bytes_saved"] = Unavailable("bytes", "no pack of this model in the store to price a token's KV")
	}
	slices.SortFunc(packs, func(a, b store.PackInfo) int { return b.LastUse.Compare(a.LastUse) })
	if len(packs) > MaxPacks {
		packs, ss.Truncated = packs[:MaxPacks], true
	}
	ss.PacksTag = ListTag{Tag: TagMeasured, Window: "now", Source: "store ledger"}
	ss.Packs = make([]PackRow, 0, len(packs))
	// Packs of one identity name one model: read one manifest per
	// identity, not one per pack at every poll.
	models := map[pack.Digest]string{key: c.Model}
	for _, p := range packs {
		row := PackRow{ID: p.ID.String(), Tokens: p.Tokens, Bytes: p.Bytes, LastUse: p.LastUse, Created: p.Created,
			Pinned: p.Pinned, Quarantined: p.Quarantined, Source: p.Source}
		model, ok := models[p.IdentityKey]
		if !ok {
			if m, err := c.Store.Manifest(p.ID); err == nil {
				model = "model " + m.Identity.Model.Short()
				models[p.IdentityKey] = model
			} else {
				model = "identity " + p.IdentityKey.Short() // another pack of it may read
			}
		}
		row.Model = model
		ss.Packs = append(ss.Packs, row)
	}
	return ss
}

func (c *Config) receiptsState(refused map[string]int) ReceiptsState {
	rs := ReceiptsState{RefusedSinceStart: refused}
	list, total, err := c.Store.LatestReceipts(MaxReceipts)
	if err != nil {
		rs.Error = fmt.Sprintf("store receipts: %v", err)
		rs.Total = Unavailable("receipts", rs.Error)
		return rs
	}
	rs.Total = Measured(float64(total), "receipts", "kept by the store", "store ledger")
	rs.ListTag = ListTag{Tag: TagMeasured, Window: "kept by the store", Source: "store ledger"}
	rs.List, rs.Truncated = list, total > len(list)
	if rs.List == nil {
		rs.List = []store.Receipt{}
	}
	return rs
}
