//go:build linux

package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// defaultDirectAlign is the alignment assumed where statx does not
// report the file's direct-I/O alignment (kernels before 6.1): a page,
// a multiple of every common logical block size.
const defaultDirectAlign = 4096

// maxDirectAlign bounds the alignment a direct file may ask for: a
// larger one (none is known) is treated as no direct I/O.
const maxDirectAlign = 64 << 10

// CreateTempDirect implements DirectCreator: the file is created with
// O_DIRECT, and its alignment is read with statx (STATX_DIOALIGN), then
// rounded up to the file system's block size so that a tail written
// through the page cache starts a block of its own (no read of a
// partly written block). EINVAL from the open (the file system refuses
// O_DIRECT) or an alignment of zero is ErrNoDirect.
func (osFS) CreateTempDirect(dir, pattern string) (DirectFile, error) {
	prefix, suffix, _ := strings.Cut(pattern, "*")
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_DIRECT, 0o600)
		if errors.Is(err, fs.ErrExist) && try < 10000 {
			continue
		}
		if errors.Is(err, unix.EINVAL) {
			// Some file systems create the file before they refuse
			// the flag; the name is new (O_EXCL), so it is ours.
			_ = os.Remove(name)
			return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: %w", ErrNoDirect, err)}
		}
		if err != nil {
			return nil, err
		}
		align, err := directAlign(f)
		if err != nil {
			_ = f.Close()
			_ = os.Remove(name)
			return nil, &fs.PathError{Op: "statx", Path: name, Err: err}
		}
		return &directFile{File: f, align: align}, nil
	}
}

// directAlign returns the alignment direct writes on f need: the larger
// of statx's memory and offset alignments, rounded up to the file's
// block size when that is a larger power of two (within maxDirectAlign).
func directAlign(f *os.File) (int, error) {
	var st unix.Statx_t
	var serr error
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	if err := rc.Control(func(fd uintptr) {
		serr = unix.Statx(int(fd), "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN|unix.STATX_BASIC_STATS, &st)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	align := defaultDirectAlign
	if st.Mask&unix.STATX_DIOALIGN != 0 {
		if st.Dio_offset_align == 0 || st.Dio_mem_align == 0 {
			return 0, fmt.Errorf("%w: the file system reports no alignment", ErrNoDirect)
		}
		align = int(max(st.Dio_offset_align, st.Dio_mem_align))
	}
	if blk := int(st.Blksize); blk > align && blk <= maxDirectAlign && bits.OnesCount(uint(blk)) == 1 {
		align = blk
	}
	if align > maxDirectAlign || bits.OnesCount(uint(align)) != 1 {
		return 0, fmt.Errorf("%w: alignment %d", ErrNoDirect, align)
	}
	return align, nil
}

// directFile is an *os.File opened with O_DIRECT.
type directFile struct {
	*os.File
	align int
}

func (d *directFile) Align() int { return d.align }

func (d *directFile) EndDirect() error {
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		var fl int
		if fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0); ferr == nil {
			_, ferr = unix.FcntlInt(fd, unix.F_SETFL, fl&^unix.O_DIRECT)
		}
	}); err != nil {
		return err
	}
	if ferr != nil {
		return &fs.PathError{Op: "fcntl", Path: d.Name(), Err: ferr}
	}
	return nil
}
