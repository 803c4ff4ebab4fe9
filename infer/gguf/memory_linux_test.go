package gguf

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestOpenInReadOnly writes into a tensor's bytes in each memory and
// expects the write to fault: neither a mapping nor resident memory may
// let a stray write change the weights.
func TestOpenInReadOnly(t *testing.T) {
	eachMemory(t, sharedFile(t, "models/stories260K.gguf"), func(t *testing.T, _ Memory, f *File) {
		if !writeFaults(f.Data(&f.Tensors[0])) {
			t.Errorf("a write into tensor %s's bytes did not fault", f.Tensors[0].Name)
		}
	})
}

// writeFaults adds 0 to the first four bytes of b (aligned: a tensor's
// data starts on the file's alignment) with an atomic add, a write the
// compiler cannot drop and that changes nothing, and reports whether it
// faulted.
func writeFaults(b []byte) (faulted bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			faulted = true
		}
	}()
	atomic.AddUint32((*uint32)(unsafe.Pointer(&b[0])), 0)
	return false
}

// TestResidentHugePages checks the resident memory's placement: its
// mapping starts on a huge page and carries the kernel's huge-page
// advice (VmFlags "hg" in /proc/self/smaps), where the kernel has
// transparent huge pages at all. Whether whole huge pages back it
// depends on the system's free memory, so that is not asserted.
func TestResidentHugePages(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skipf("this kernel has no transparent huge pages: %v", err)
	}
	f, err := OpenIn(sharedFile(t, "models/stories260K.gguf"), Resident)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addr := uintptr(unsafe.Pointer(&f.data[0]))
	start, flags, err := smapsOf(addr)
	if err != nil {
		t.Fatal(err)
	}
	if start != addr || start%hugePage != 0 {
		t.Errorf("the file's bytes start at %#x in a mapping from %#x; want both on a 2 MiB boundary", addr, start)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("VmFlags %q lack hg (MADV_HUGEPAGE)", flags)
	}
	if strings.Contains(" "+flags+" ", " wr ") {
		t.Errorf("VmFlags %q: the memory is writable", flags)
	}
}

// smapsOf returns the start and VmFlags of this process's mapping that
// holds addr.
func smapsOf(addr uintptr) (start uintptr, flags string, err error) {
	fh, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, "", err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	in := false
	for sc.Scan() {
		line := sc.Text()
		// A mapping's header: "start-end perms offset dev inode [path]";
		// its fields follow as "Name: value" lines.
		if f := strings.Fields(line); len(f) >= 5 && !strings.HasSuffix(f[0], ":") {
			lo, hi, _ := strings.Cut(f[0], "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				return 0, "", fmt.Errorf("/proc/self/smaps: unexpected line %q", line)
			}
			in = uintptr(a) <= addr && addr < uintptr(b)
			start = uintptr(a)
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return start, strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, "", err
	}
	return 0, "", fmt.Errorf("no mapping of /proc/self/smaps holds %#x", addr)
}
