package cukernels

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The artifacts scripts/cuda/build-kernels.sh builds from the *.cu and
// *.cuh files of this directory, and its manifest of them.
var (
	//go:embed muser_sm90.cubin
	cubin []byte
	//go:embed muser_compute90.ptx
	ptx []byte
	//go:embed manifest.txt
	manifestText []byte
)

// Cubin returns a copy of the kernels compiled for sm_90 (H100, H200), the
// image to give cuModuleLoadData on those GPUs.
func Cubin() []byte { return bytes.Clone(cubin) }

// PTX returns a copy of the kernels as compute_90 PTX text, which the
// driver JIT-compiles for newer GPUs. Every float addition, subtraction
// and multiplication in it carries an explicit rounding mode, so no JIT
// may contract them into fused multiply-adds.
func PTX() []byte { return bytes.Clone(ptx) }

var embedded = sync.OnceValues(func() (*Manifest, error) { return ParseManifest(manifestText) })

// EmbeddedManifest returns the manifest of the embedded artifacts. A test
// keeps it parseable and true to the sources and artifacts.
func EmbeddedManifest() (*Manifest, error) { return embedded() }

// SourceDigest returns the digest ("sha256:" and 64 hex digits) of the
// sources the embedded artifacts were built from (DigestSources), or ""
// if the embedded manifest does not parse.
func SourceDigest() string {
	m, err := embedded()
	if err != nil {
		return ""
	}
	return m.SourceDigest
}

// Kernels returns the names of the kernels in the embedded module, sorted
// (nil if the embedded manifest does not parse).
func Kernels() []string {
	m, err := embedded()
	if err != nil {
		return nil
	}
	return slices.Clone(m.Kernels)
}

// Manifest records how a set of kernel artifacts was built. Its text form
// (MarshalText, ParseManifest) is one field per line, key then value:
//
//	# comment
//	format 1
//	source-digest sha256:<64 hex>
//	sources <file> <file> …              (*.cu, *.cuh, sorted)
//	nvcc <the version line of nvcc --version>
//	cubin-flags <nvcc flags>
//	ptx-flags <nvcc flags>
//	cubin <file> sha256:<64 hex> <bytes>
//	ptx <file> sha256:<64 hex> <bytes>
//	kernel <name>                        (one line per kernel, sorted)
type Manifest struct {
	Format       int
	SourceDigest string
	Sources      []string
	NVCC         string
	CubinFlags   string
	PTXFlags     string
	Cubin, PTX   Artifact
	Kernels      []string
}

// Artifact is one built file: its name, digest ("sha256:" and 64 hex
// digits) and size in bytes.
type Artifact struct {
	Name   string
	Digest string
	Size   int64
}

// manifestFormat is the only format version ParseManifest reads.
const manifestFormat = 1

// manifestHeader is the comment MarshalText writes first (the build
// script writes the same line).
const manifestHeader = "# muser CUDA kernels: written by scripts/cuda/build-kernels.sh; do not edit."

// ParseManifest parses a manifest's text. A malformed one gives a
// *ManifestError naming the line, wrapping ErrManifest.
func ParseManifest(text []byte) (*Manifest, error) {
	m := &Manifest{}
	seen := map[string]bool{}
	lines := strings.Split(string(text), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	for i, line := range lines {
		fail := func(format string, a ...any) error {
			return &ManifestError{Line: i + 1, Err: fmt.Errorf("%w: "+format, append([]any{ErrManifest}, a...)...)}
		}
		if line == "" || line[0] == '#' {
			continue
		}
		key, val, ok := strings.Cut(line, " ")
		if !ok || val == "" {
			return nil, fail("%q has no value", key)
		}
		if strings.ContainsAny(line, "\r\t\x00") {
			return nil, fail("control character in %q", key)
		}
		if key != "kernel" {
			if seen[key] {
				return nil, fail("%q repeated", key)
			}
			seen[key] = true
		}
		switch key {
		case "format":
			if val != strconv.Itoa(manifestFormat) {
				return nil, fail("format %q, want %d", val, manifestFormat)
			}
			m.Format = manifestFormat
		case "source-digest":
			if !validDigest(val) {
				return nil, fail("source digest %q is not sha256:<64 lowercase hex>", val)
			}
			m.SourceDigest = val
		case "sources":
			names := strings.Split(val, " ")
			for j, s := range names {
				if !validSourceName(s) {
					return nil, fail("source name %q", s)
				}
				if j > 0 && names[j-1] >= s {
					return nil, fail("sources not sorted or repeated at %q", s)
				}
			}
			m.Sources = names
		case "nvcc":
			m.NVCC = val
		case "cubin-flags":
			m.CubinFlags = val
		case "ptx-flags":
			m.PTXFlags = val
		case "cubin", "ptx":
			a, err := parseArtifact(val)
			if err != nil {
				return nil, fail("%s: %v", key, err)
			}
			if key == "cubin" {
				m.Cubin = a
			} else {
				m.PTX = a
			}
		case "kernel":
			if !validIdent(val) {
				return nil, fail("kernel name %q", val)
			}
			if n := len(m.Kernels); n > 0 && m.Kernels[n-1] >= val {
				return nil, fail("kernels not sorted or repeated at %q", val)
			}
			m.Kernels = append(m.Kernels, val)
		default:
			return nil, fail("unknown key %q", key)
		}
	}
	for _, k := range []string{"format", "source-digest", "sources", "nvcc", "cubin-flags", "ptx-flags", "cubin", "ptx"} {
		if !seen[k] {
			return nil, &ManifestError{Err: fmt.Errorf("%w: no %q line", ErrManifest, k)}
		}
	}
	if len(m.Kernels) == 0 {
		return nil, &ManifestError{Err: fmt.Errorf("%w: no kernel lines", ErrManifest)}
	}
	return m, nil
}

// parseArtifact parses "<file> sha256:<hex> <size>".
func parseArtifact(val string) (Artifact, error) {
	f := strings.Split(val, " ")
	if len(f) != 3 {
		return Artifact{}, fmt.Errorf("want \"<file> sha256:<hex> <bytes>\", got %q", val)
	}
	if !validFileName(f[0]) {
		return Artifact{}, fmt.Errorf("file name %q", f[0])
	}
	if !validDigest(f[1]) {
		return Artifact{}, fmt.Errorf("digest %q is not sha256:<64 lowercase hex>", f[1])
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != f[2] {
		return Artifact{}, fmt.Errorf("size %q", f[2])
	}
	return Artifact{Name: f[0], Digest: f[1], Size: size}, nil
}

// MarshalText returns m in the text form ParseManifest reads, exactly as
// the build script writes it.
func (m *Manifest) MarshalText() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintln(&b, manifestHeader)
	fmt.Fprintf(&b, "format %d\n", m.Format)
	fmt.Fprintf(&b, "source-digest %s\n", m.SourceDigest)
	fmt.Fprintf(&b, "sources %s\n", strings.Join(m.Sources, " "))
	fmt.Fprintf(&b, "nvcc %s\n", m.NVCC)
	fmt.Fprintf(&b, "cubin-flags %s\n", m.CubinFlags)
	fmt.Fprintf(&b, "ptx-flags %s\n", m.PTXFlags)
	fmt.Fprintf(&b, "cubin %s %s %d\n", m.Cubin.Name, m.Cubin.Digest, m.Cubin.Size)
	fmt.Fprintf(&b, "ptx %s %s %d\n", m.PTX.Name, m.PTX.Digest, m.PTX.Size)
	for _, k := range m.Kernels {
		fmt.Fprintf(&b, "kernel %s\n", k)
	}
	return b.Bytes(), nil
}

// SourceFile is one kernel source file: its base name and contents.
type SourceFile struct {
	Name string
	Data []byte
}

// DigestSources returns the source digest of files, "sha256:" and 64 hex
// digits: SHA-256 over the files in byte order of their names, each as its
// name, a NUL byte, its size in decimal, a NUL byte and its contents. The
// build script computes the same digest with sha256sum.
func DigestSources(files []SourceFile) string {
	fs := slices.Clone(files)
	slices.SortFunc(fs, func(a, b SourceFile) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	for _, f := range fs {
		fmt.Fprintf(h, "%s\x00%d\x00", f.Name, len(f.Data))
		h.Write(f.Data)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// DigestBytes returns "sha256:" and the 64 hex digits of b's SHA-256, the
// form of an Artifact's Digest.
func DigestBytes(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func validDigest(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// validFileName accepts a plain file name: letters, digits, '_', '-', '.',
// not starting with '.'.
func validFileName(s string) bool {
	if s == "" || s[0] == '.' || len(s) > 255 {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func validSourceName(s string) bool {
	return validFileName(s) && (strings.HasSuffix(s, ".cu") || strings.HasSuffix(s, ".cuh"))
}

// validIdent accepts a C identifier.
func validIdent(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
