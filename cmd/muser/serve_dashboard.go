package main

import (
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/net/repl"
	"github.com/muserhq/muser/serve/dashboard"
)

// replWatch keeps what the dashboard's Nodes tab shows of the replication
// side beyond its counters: the last push to each peer, and what the
// prefill producer did for the last request. Its methods are safe for
// concurrent use.
type replWatch struct {
	mu       sync.Mutex
	lastPush map[string]dashboard.PushState
	outcomes map[string]int
	last     string
	lastTime time.Time
	lastErr  string
}

func newReplWatch() *replWatch {
	return &replWatch{lastPush: map[string]dashboard.PushState{}, outcomes: map[string]int{}}
}

// onPush returns the Replicator's OnResult hook for peer.
func (w *replWatch) onPush(peer string) func(repl.Result, error) {
	return func(res repl.Result, err error) {
		p := dashboard.PushState{Time: time.Now().UTC(), Pack: res.Pack.String(), OK: err == nil, Moved: res.Moved,
			Chunks: res.Chunks, MovedBytes: res.MovedBytes, DurationMS: float64(res.Duration.Microseconds()) / 1000}
		if err != nil {
			p.Error = err.Error()
		}
		w.mu.Lock()
		w.lastPush[peer] = p
		w.mu.Unlock()
	}
}

// outcome records what the producer did for one request.
func (w *replWatch) outcome(o string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.outcomes[o]++
	w.last, w.lastTime, w.lastErr = o, time.Now().UTC(), ""
	if err != nil {
		w.lastErr = err.Error()
	}
}

// dashboardCluster is the dashboard's Nodes hook for a node of cluster h;
// rs is its replication side, nil when no replication flag was given.
func dashboardCluster(h *cluster.Home, rs *serveRepl) func() *dashboard.ClusterState {
	return func() *dashboard.ClusterState {
		cs := &dashboard.ClusterState{ClusterID: h.Info().ClusterID, Node: h.Name()}
		peers, err := h.Peers()
		if err != nil {
			peers = nil // the tab shows no peers; the registry's error is logged by the commands that edit it
		}
		sort.Slice(peers, func(i, j int) bool { return peers[i].Name < peers[j].Name })
		reps := map[string]*repl.Replicator{}
		var watch *replWatch
		if rs != nil {
			watch = rs.watch
			cs.Role = rs.opts.role
			if rs.node != nil {
				if a := rs.node.Addr(); a != nil {
					cs.ReplAddr = a.String()
				}
			}
			for i, p := range rs.opts.replicateTo {
				if i < len(rs.reps) {
					reps[p] = rs.reps[i]
				}
			}
			if rs.opts.prefillNode != "" {
				watch.mu.Lock()
				cs.Producer = &dashboard.ProducerState{Name: rs.opts.prefillNode, Fallback: rs.fallback.String(),
					Outcomes: maps.Clone(watch.outcomes), Last: watch.last, LastTime: watch.lastTime, LastError: watch.lastErr}
				watch.mu.Unlock()
			}
		}
		const notReplicated = "this node does not replicate to the peer (--replicate-to)"
		for _, p := range peers {
			ps := dashboard.PeerState{Name: p.Name, Addr: p.Addr, Active: p.Active(), Added: p.Added}
			rep := reps[p.Name]
			if rep == nil {
				for _, f := range []*dashboard.Figure{&ps.Queue, &ps.Pushed, &ps.Refused, &ps.Retries, &ps.Dropped} {
					*f = dashboard.Unavailable("packs", notReplicated)
				}
				cs.Peers = append(cs.Peers, ps)
				continue
			}
			ps.ReplicateTo = true
			st := rep.Stats()
			const since, src = "since start", "replicator"
			ps.Queue = dashboard.Measured(float64(rep.Pending()), "packs", "now", src)
			ps.Pushed = dashboard.Measured(float64(st.Pushed), "packs", since, src)
			ps.Refused = dashboard.Measured(float64(st.Refused), "packs", since, src)
			ps.Retries = dashboard.Measured(float64(st.Retries), "attempts", since, src)
			ps.Dropped = dashboard.Measured(float64(st.Dropped), "packs", since, src)
			watch.mu.Lock()
			if lp, ok := watch.lastPush[p.Name]; ok {
				ps.LastPush = &lp
			}
			watch.mu.Unlock()
			cs.Peers = append(cs.Peers, ps)
		}
		return cs
	}
}
