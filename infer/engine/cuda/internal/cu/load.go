package cu

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"
)

// EnvLib names the environment variable that, when set, is the only
// library path Open tries.
const EnvLib = "MUSER_LIBCUDA"

// libName is the driver library's soname.
const libName = "libcuda.so.1"

// candidate is one library Open may load.
type candidate struct {
	path     string // absolute, or the bare soname for the dynamic loader's search
	explicit bool   // named by EnvLib: loaded as given, compat directory or not
}

// candidates returns the libraries Open tries, in order, for the value of
// EnvLib and the Go architecture:
//
//  1. the path in EnvLib, when it is set, and nothing else;
//  2. /usr/local/nvidia/lib64/libcuda.so.1 (where the NVIDIA container
//     runtime mounts the host's driver);
//  3. /usr/lib/<multiarch triplet>/libcuda.so.1 (Debian, Ubuntu);
//  4. /usr/lib64/libcuda.so.1 (Red Hat, SUSE);
//  5. /usr/lib/libcuda.so.1 (Arch and others);
//  6. libcuda.so.1 through the dynamic loader's search (LD_LIBRARY_PATH,
//     the ld.so cache).
func candidates(env, goarch string) []candidate {
	if env != "" {
		return []candidate{{path: env, explicit: true}}
	}
	c := []candidate{{path: "/usr/local/nvidia/lib64/" + libName}}
	switch goarch {
	case "amd64":
		c = append(c, candidate{path: "/usr/lib/x86_64-linux-gnu/" + libName})
	case "arm64":
		c = append(c, candidate{path: "/usr/lib/aarch64-linux-gnu/" + libName})
	}
	return append(c,
		candidate{path: "/usr/lib64/" + libName},
		candidate{path: "/usr/lib/" + libName},
		candidate{path: libName},
	)
}

// isCompat reports whether path has a directory named "compat": the CUDA
// toolkit installs its forward-compatibility driver under
// <toolkit>/compat/ (for example /usr/local/cuda-13.0/compat/libcuda.so.1).
// That driver only works beside a matching kernel module on some data
// center GPUs; elsewhere cuInit fails, so it must not shadow the system's
// libcuda.so.1.
func isCompat(path string) bool {
	dir := filepath.Dir(filepath.Clean(path))
	for _, elem := range strings.Split(filepath.ToSlash(dir), "/") {
		if elem == "compat" {
			return true
		}
	}
	return false
}

// refuse returns an error wrapping ErrCompat when candidate c, resolved to
// the file resolved, must not be used: it lies in a compat directory and
// was not named explicitly by EnvLib.
func refuse(c candidate, resolved string) error {
	if c.explicit || !isCompat(resolved) {
		return nil
	}
	return fmt.Errorf("%w: resolves to %s", ErrCompat, resolved)
}

// Open loads the CUDA driver library and resolves the functions this
// package calls. It tries the paths candidates lists, in order; EnvLib,
// when set, is the only one. How a path is checked before it is used:
//
//   - an absolute path is resolved through its symbolic links
//     (filepath.EvalSymlinks) before it is opened, and refused if the file
//     lies in a compat directory, so such a library is never loaded;
//   - the bare soname is opened first, since only the dynamic loader knows
//     where its search leads; the file it opened is then read back with
//     dlinfo(RTLD_DI_LINKMAP) (the link map's l_name), resolved, and the
//     library closed again and refused if it lies in a compat directory.
//
// A library that lacks a function is refused too, and so is a stub (its
// cuDriverGetVersion fails with CUDA_ERROR_STUB_LIBRARY). When every
// candidate fails, Open returns a *LoadError, matching ErrNoDriver, that
// names each path and its reason. Open does not initialise the driver
// (cuInit); the library stays loaded for the life of the process.
func Open() (*Driver, error) {
	return open(candidates(os.Getenv(EnvLib), runtime.GOARCH))
}

func open(cands []candidate) (*Driver, error) {
	le := &LoadError{Lib: libName}
	for _, c := range cands {
		d, err := tryOpen(c)
		if err == nil {
			return d, nil
		}
		le.Tried = append(le.Tried, Attempt{Path: c.path, Err: err})
	}
	return nil, le
}

func tryOpen(c candidate) (*Driver, error) {
	resolved := c.path
	if strings.Contains(c.path, "/") {
		r, err := filepath.EvalSymlinks(c.path)
		if err != nil {
			return nil, err
		}
		if err := refuse(c, r); err != nil {
			return nil, err
		}
		resolved = r
	}
	h, err := sysDlopen(c.path)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(c.path, "/") {
		if p := sysLoadedPath(h); p != "" {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				p = r
			}
			if err := refuse(c, p); err != nil {
				sysDlclose(h)
				return nil, err
			}
			resolved = p
		}
	}
	d := &Driver{path: resolved}
	if missing := d.resolve(h); len(missing) > 0 {
		sysDlclose(h)
		return nil, &SymbolError{Path: resolved, Missing: missing}
	}
	var v int32
	if err := d.check("cuDriverGetVersion", call(d.fn.driverGetVersion, uintptr(unsafe.Pointer(&v)))); err != nil {
		sysDlclose(h)
		return nil, err
	}
	d.version = int(v)
	return d, nil
}
