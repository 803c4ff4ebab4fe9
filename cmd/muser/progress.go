package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/muserhq/muser/cmd/muser/internal/progress"
	"github.com/muserhq/muser/net/repl"
	"github.com/muserhq/muser/pack"
)

// transferProgress draws one progress line per pack transferred by pack
// push or pull, on a terminal stderr only (never with --json).
type transferProgress struct {
	env     *cliEnv
	verb    string // "push" or "pull"
	prep    string // "to" or "from"
	enabled bool
	mu      sync.Mutex
	m       *progress.Meter
}

func newTransferProgress(env *cliEnv, verb, prep string, asJSON bool) *transferProgress {
	return &transferProgress{env: env, verb: verb, prep: prep, enabled: !asJSON && progress.IsTerminal(env.stderr)}
}

// hook sets the replication node's progress callbacks.
func (p *transferProgress) hook(c *repl.Config) {
	if p == nil || !p.enabled {
		return
	}
	c.OnPlan = func(peer string, id pack.Digest, chunks int, bytes int64) {
		m := progress.New(p.env.stderr, fmt.Sprintf("%s %s %s %s", p.verb, id.Short(), p.prep, peer), progress.Bytes, bytes,
			progress.Options{Terminal: true})
		p.mu.Lock()
		p.m = m
		p.mu.Unlock()
	}
	add := func(_ string, _ pack.Digest, size int) {
		p.mu.Lock()
		m := p.m
		p.mu.Unlock()
		m.Add(int64(size))
	}
	c.OnSent, c.OnChunk = add, add
}

// finish ends the current pack's line.
func (p *transferProgress) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	m := p.m
	p.m = nil
	p.mu.Unlock()
	m.Finish()
}

// newMeter returns a progress line on stderr when it is a terminal and
// quiet is false (a --json run), else a Meter that draws nothing.
func newMeter(env *cliEnv, quiet bool, label string, unit progress.Unit, total int64, delay time.Duration) *progress.Meter {
	return progress.New(env.stderr, label, unit, total,
		progress.Options{Terminal: !quiet && progress.IsTerminal(env.stderr), Delay: delay})
}
