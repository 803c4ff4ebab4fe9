package cluster

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// generationReserve is how far ahead of the generation it hands out a
// Generations persists its high-water mark, so that seal.gen is written at
// most about once per reserve period rather than once per seal.
const generationReserve = uint64(time.Minute)

// Generations hands out the sealing generations of this node's replication
// offers (docs/replication.md, "Replay rules"): each call to Next returns a
// number greater than every number this node returned before, across
// restarts, and close to the current Unix time in nanoseconds, so that a
// node whose state was lost still starts above what its peers accepted.
// A high-water mark kept in seal.gen makes it robust against the clock
// stepping back.
//
// One process seals for a data directory at a time (the store's lock
// guarantees it); within it, Generations is safe for concurrent use.
type Generations struct {
	mu       sync.Mutex
	path     string
	now      func() time.Time
	loaded   bool
	last     uint64
	reserved uint64
}

// Generations returns this node's sealing generation source. now is the
// clock (time.Now when nil).
func (h *Home) Generations(now func() time.Time) *Generations {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen == nil {
		if now == nil {
			now = time.Now
		}
		h.gen = &Generations{path: h.file(genFile), now: now}
	}
	return h.gen
}

// Next returns a fresh generation.
func (g *Generations) Next() (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.loaded {
		data, err := readFileMax(g.path, 64)
		switch {
		case err == nil:
			v, perr := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
			if perr != nil {
				return 0, &FileError{Path: g.path, Err: fmt.Errorf("%w: not a decimal generation: %v", ErrBadRegistry, perr)}
			}
			g.last, g.reserved = v, v
		case !isNotExist(err):
			return 0, err
		}
		g.loaded = true
	}
	n := g.last + 1
	if t := g.now().UnixNano(); t > 0 && uint64(t) > n {
		n = uint64(t)
	}
	if n >= g.reserved {
		r := n + generationReserve
		if err := writeFileAtomic(g.path, []byte(strconv.FormatUint(r, 10)+"\n")); err != nil {
			return 0, fmt.Errorf("cluster: persist sealing generation: %w", err)
		}
		g.reserved = r
	}
	g.last = n
	return n, nil
}
