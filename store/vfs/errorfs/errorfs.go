package errorfs

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/muserhq/muser/store/vfs"
)

// ErrInjected is returned by operations an Injector chose to fail.
var ErrInjected = errors.New("injected fault")

// Op is a kind of file operation.
type Op int

// The operations an Injector sees.
const (
	OpMkdirAll Op = iota + 1
	OpCreate
	OpOpen
	OpWrite
	OpRead
	OpSync
	OpClose
	OpRename
	OpRemove
	OpStat
	OpReadDir
	OpSyncDir
	// OpEndDirect is a direct file's EndDirect (vfs.DirectFile).
	OpEndDirect
)

var opNames = map[Op]string{
	OpMkdirAll: "mkdirall", OpCreate: "create", OpOpen: "open", OpWrite: "write",
	OpRead: "read", OpSync: "sync", OpClose: "close", OpRename: "rename",
	OpRemove: "remove", OpStat: "stat", OpReadDir: "readdir", OpSyncDir: "syncdir", OpEndDirect: "enddirect",
}

// String names the operation.
func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Injector decides whether an operation fails.
type Injector interface {
	// MaybeError returns the error the operation op on path fails with,
	// or nil.
	MaybeError(op Op, path string) error
}

// InjectorFunc adapts a function to an Injector.
type InjectorFunc func(op Op, path string) error

// MaybeError calls f.
func (f InjectorFunc) MaybeError(op Op, path string) error { return f(op, path) }

// Counter counts operations of the given kinds and fails the n-th one
// (counting from 0) with ErrInjected; with n < 0 it only counts.
type Counter struct {
	mu    sync.Mutex
	ops   map[Op]bool
	n     int
	seen  int
	fired bool
}

// OnNth returns a Counter that fails the n-th operation of the given kinds
// (all write-path kinds if none are given).
func OnNth(n int, ops ...Op) *Counter {
	if len(ops) == 0 {
		ops = []Op{OpMkdirAll, OpCreate, OpWrite, OpSync, OpClose, OpRename, OpSyncDir, OpEndDirect}
	}
	c := &Counter{ops: map[Op]bool{}, n: n}
	for _, o := range ops {
		c.ops[o] = true
	}
	return c
}

// MaybeError counts op and fails it if it is the chosen one.
func (c *Counter) MaybeError(op Op, path string) error {
	if !c.ops[op] {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.seen
	c.seen++
	if i == c.n {
		c.fired = true
		return fmt.Errorf("%s %s: %w", op, path, ErrInjected)
	}
	return nil
}

// Seen returns how many matching operations ran (or were failed).
func (c *Counter) Seen() int { c.mu.Lock(); defer c.mu.Unlock(); return c.seen }

// Fired reports whether the chosen operation was reached and failed.
func (c *Counter) Fired() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.fired }

// FS is a vfs.FS that consults an Injector before each operation.
type FS struct {
	inner vfs.FS
	inj   Injector
}

// Wrap returns an FS over inner that injects faults chosen by inj.
func Wrap(inner vfs.FS, inj Injector) *FS { return &FS{inner: inner, inj: inj} }

// MkdirAll implements vfs.FS.
func (f *FS) MkdirAll(path string, perm fs.FileMode) error {
	if err := f.inj.MaybeError(OpMkdirAll, path); err != nil {
		return err
	}
	return f.inner.MkdirAll(path, perm)
}

// CreateTemp implements vfs.FS.
func (f *FS) CreateTemp(dir, pattern string) (vfs.File, error) {
	if err := f.inj.MaybeError(OpCreate, dir); err != nil {
		return nil, err
	}
	file, err := f.inner.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &errFile{File: file, inj: f.inj}, nil
}

// CreateTempDirect implements vfs.DirectCreator when inner does (an
// error wrapping vfs.ErrNoDirect when it does not). The create counts as
// OpCreate; the file's writes, syncs and closes are injected as any
// file's, and its EndDirect as OpEndDirect.
func (f *FS) CreateTempDirect(dir, pattern string) (vfs.DirectFile, error) {
	dc, ok := f.inner.(vfs.DirectCreator)
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: vfs.ErrNoDirect}
	}
	if err := f.inj.MaybeError(OpCreate, dir); err != nil {
		return nil, err
	}
	file, err := dc.CreateTempDirect(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &errDirectFile{errFile: errFile{File: file, inj: f.inj}, d: file}, nil
}

// Open implements vfs.FS.
func (f *FS) Open(name string) (vfs.File, error) {
	if err := f.inj.MaybeError(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &errFile{File: file, inj: f.inj}, nil
}

// Rename implements vfs.FS.
func (f *FS) Rename(oldpath, newpath string) error {
	if err := f.inj.MaybeError(OpRename, newpath); err != nil {
		return err
	}
	return f.inner.Rename(oldpath, newpath)
}

// Remove implements vfs.FS.
func (f *FS) Remove(name string) error {
	if err := f.inj.MaybeError(OpRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

// Stat implements vfs.FS.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	if err := f.inj.MaybeError(OpStat, name); err != nil {
		return nil, err
	}
	return f.inner.Stat(name)
}

// ReadDir implements vfs.FS.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.inj.MaybeError(OpReadDir, name); err != nil {
		return nil, err
	}
	return f.inner.ReadDir(name)
}

// SyncDir implements vfs.FS.
func (f *FS) SyncDir(dir string) error {
	if err := f.inj.MaybeError(OpSyncDir, dir); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

type errFile struct {
	vfs.File
	inj Injector
}

func (e *errFile) Write(p []byte) (int, error) {
	if err := e.inj.MaybeError(OpWrite, e.Name()); err != nil {
		// A failed write may still have written part of p, as a real
		// short write would.
		n, _ := e.File.Write(p[:len(p)/2])
		return n, err
	}
	return e.File.Write(p)
}

func (e *errFile) Read(p []byte) (int, error) {
	if err := e.inj.MaybeError(OpRead, e.Name()); err != nil {
		return 0, err
	}
	return e.File.Read(p)
}

func (e *errFile) ReadAt(p []byte, off int64) (int, error) {
	if err := e.inj.MaybeError(OpRead, e.Name()); err != nil {
		return 0, err
	}
	return e.File.ReadAt(p, off)
}

func (e *errFile) Sync() error {
	if err := e.inj.MaybeError(OpSync, e.Name()); err != nil {
		return err
	}
	return e.File.Sync()
}

func (e *errFile) Close() error {
	if err := e.inj.MaybeError(OpClose, e.Name()); err != nil {
		_ = e.File.Close()
		return err
	}
	return e.File.Close()
}

type errDirectFile struct {
	errFile
	d vfs.DirectFile
}

func (e *errDirectFile) Align() int { return e.d.Align() }

func (e *errDirectFile) EndDirect() error {
	if err := e.inj.MaybeError(OpEndDirect, e.Name()); err != nil {
		return err
	}
	return e.d.EndDirect()
}
