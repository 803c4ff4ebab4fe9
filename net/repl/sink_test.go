package repl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/muserhq/muser/net/cluster/clustertest"
	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/vfs"
	"github.com/muserhq/muser/store/vfs/errorfs"
)

// failNthSync fails the n-th fsync (counting from 1) of a file under a
// chunks directory, once, and counts those fsyncs.
type failNthSync struct {
	mu    sync.Mutex
	n     int
	syncs int
}

func (f *failNthSync) MaybeError(op errorfs.Op, path string) error {
	if op != errorfs.OpSync || !strings.Contains(path, string(filepath.Separator)+"chunks"+string(filepath.Separator)) {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncs++
	if f.syncs == f.n {
		return errorfs.ErrInjected
	}
	return nil
}

// TestReceiverFsyncFailure: the receiver's chunk files are fsynced in the
// background while chunks arrive (store.ChunkSink); when one fsync fails,
// the transfer ends with internal, no pack becomes visible and no
// temporary file stays, and a retry moves only the chunks that did not
// become durable.
func TestReceiverFsyncFailure(t *testing.T) {
	const blocks = 10
	cnodes := clustertest.New(t, "alpha", "beta")
	inj := &failNthSync{n: 4}
	stores := []*store.Store{
		storetest.Open(t, cnodes[0].Home, store.Options{BlockTokens: testBlock, Node: "alpha", NoSync: true}),
		// beta fsyncs (NoSync false) through a filesystem that fails one.
		storetest.Open(t, cnodes[1].Home, store.Options{BlockTokens: testBlock, Node: "beta", FS: errorfs.Wrap(vfs.Default, inj)}),
	}
	var nodes []*node
	for i, cn := range cnodes {
		rn, err := New(Config{Store: stores[i], Cluster: cn.Cluster, RevalidateEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := rn.Listen("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- rn.Serve(context.Background()) }()
		t.Cleanup(func() {
			if err := rn.Close(); err != nil {
				t.Errorf("close %s: %v", cn.Name, err)
			}
			if err := <-done; err != nil {
				t.Errorf("serve %s: %v", cn.Name, err)
			}
		})
		nodes = append(nodes, &node{Node: cn, store: stores[i], repl: rn})
	}
	clustertest.Admit(t, nodes[0].Node, "beta", nodes[1].repl.Addr().String())
	clustertest.Admit(t, nodes[1].Node, "alpha", nodes[0].repl.Addr().String())
	alpha, beta := nodes[0], nodes[1]
	id, _ := publish(t, alpha.store, 9, blocks)

	_, err := alpha.repl.Push(ctxT(t), "beta", id)
	wantWire(t, err, wire.CodeInternal, true)
	if got := packCount(t, beta.store); got != 0 {
		t.Fatalf("beta holds %d packs after a failed fsync, want 0", got)
	}
	m, err := alpha.store.Manifest(id)
	if err != nil {
		t.Fatal(err)
	}
	missing, err := beta.store.MissingChunks(m.Chunks)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) == 0 {
		t.Fatal("every chunk is under its ID on beta although one fsync failed")
	}
	var temps []string
	_ = filepath.WalkDir(filepath.Join(cnodes[1].Home, "chunks"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), ".") {
			temps = append(temps, p)
		}
		return nil
	})
	if len(temps) != 0 {
		t.Errorf("temporary chunk files left on beta: %v", temps)
	}

	res, err := alpha.repl.Push(ctxT(t), "beta", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != len(missing) {
		t.Errorf("retry moved %d chunks, want the %d that were not durable", res.Moved, len(missing))
	}
	if got, want := restoreAll(t, beta.store, id), restoreAll(t, alpha.store, id); !equalBlocks(got, want) {
		t.Fatal("the retried pack restores to other bytes")
	}
}
