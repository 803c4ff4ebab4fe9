package store

import (
	"sync"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store/vfs"
)

// prefetchAhead is how many chunk bytes a restore asks the kernel to
// read ahead of the chunk it verifies: after an install with direct I/O
// (ChunkSink) the files are not in the page cache, and one chunk read
// at a time leaves the disk idle while the previous one is hashed.
const prefetchAhead = 16 << 20

// prefetcher opens the chunk files a restore will read next and asks the
// kernel to read them into the page cache (vfs.WillNeed), keeping about
// prefetchAhead bytes ahead of the reader. It is only a hint: a file it
// cannot open is left to the reader, which reports it.
type prefetcher struct {
	mu   sync.Mutex
	cond *sync.Cond
	pos  int // the block the reader is at
	stop bool
	done chan struct{}
}

// prefetch starts a prefetcher over chunks; the reader calls at(i) as it
// reaches block i and end when it stops reading.
func (s *Store) prefetch(chunks []pack.ChunkRef) *prefetcher {
	p := &prefetcher{done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	go func() {
		defer close(p.done)
		ahead := 0 // bytes advised beyond the reader's block
		for i := 1; i < len(chunks); i++ {
			p.mu.Lock()
			if i <= p.pos { // the reader is past i: go on ahead of it
				i, ahead = p.pos+1, 0
				if i >= len(chunks) {
					p.mu.Unlock()
					return
				}
			}
			for !p.stop && i > p.pos && ahead >= prefetchAhead {
				p.cond.Wait()
				ahead = 0
				for j := p.pos + 1; j < i; j++ {
					ahead += int(chunks[j].Size)
				}
			}
			stop := p.stop
			p.mu.Unlock()
			if stop {
				return
			}
			if f, err := s.fs.Open(s.chunkPath(chunks[i].ID)); err == nil {
				vfs.WillNeed(f)
				_ = f.Close()
			}
			ahead += int(chunks[i].Size)
		}
	}()
	return p
}

// at tells the prefetcher that the reader has reached block i.
func (p *prefetcher) at(i int) {
	p.mu.Lock()
	p.pos = i
	p.mu.Unlock()
	p.cond.Signal()
}

// end stops the prefetcher and waits for it.
func (p *prefetcher) end() {
	p.mu.Lock()
	p.stop = true
	p.mu.Unlock()
	p.cond.Signal()
	<-p.done
}
