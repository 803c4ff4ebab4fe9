package vfs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/muserhq/muser/store/vfs"
)

// aligned returns n bytes aligned to a.
func aligned(n, a int) []byte {
	b := make([]byte, n+a)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & uintptr(a-1))
	return b[off : off+n]
}

// TestCreateTempDirect: on Linux the default file system creates a
// temporary file for direct I/O in dir, named from the pattern, with a
// power-of-two alignment; an aligned write, EndDirect and an unaligned
// tail store exactly those bytes. Elsewhere it is ErrNoDirect.
func TestCreateTempDirect(t *testing.T) {
	dir := t.TempDir()
	dc, ok := vfs.Default.(vfs.DirectCreator)
	if !ok {
		t.Fatal("vfs.Default does not implement DirectCreator")
	}
	f, err := dc.CreateTempDirect(dir, ".tmp-*.x")
	if runtime.GOOS != "linux" {
		if !errors.Is(err, vfs.ErrNoDirect) {
			t.Fatalf("got %v, want ErrNoDirect", err)
		}
		return
	}
	if errors.Is(err, vfs.ErrNoDirect) {
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("a refused direct open left %d files", len(ents))
		}
		t.Skipf("the test directory refuses direct I/O: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if base := filepath.Base(f.Name()); filepath.Dir(f.Name()) != dir || !strings.HasPrefix(base, ".tmp-") || !strings.HasSuffix(base, ".x") {
		t.Errorf("name %s: want .tmp-*.x in %s", f.Name(), dir)
	}
	a := f.Align()
	if a < 512 || a&(a-1) != 0 {
		t.Fatalf("Align: got %d, want a power of two of at least 512", a)
	}
	data := aligned(3*a+a/2+1, a)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	body := 3 * a
	if n, err := f.Write(data[:body]); err != nil || n != body {
		t.Fatalf("direct write: %d, %v", n, err)
	}
	if err := f.EndDirect(); err != nil {
		t.Fatalf("EndDirect: %v", err)
	}
	if n, err := f.Write(data[body:]); err != nil || n != len(data)-body {
		t.Fatalf("tail write: %d, %v", n, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(data))
	}
}
