package engine

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/zeebo/blake3"

	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kvcache"
)

// KeyArchitecture is the metadata key naming a model's architecture.
const KeyArchitecture = "general.architecture"

// ErrNoDevice is returned by Open and Load when Options.Device is nil.
var ErrNoDevice = errors.New("engine: no device given")

// Options configures Open and Load.
type Options struct {
	// Device computes the model (infer/engine/cpu, for one). Required.
	Device Device
	// KV is the element type of KV caches (default f16).
	KV kvcache.DType
	// BatchSize is the most tokens one Backend.Forward call processes;
	// longer batches are split. 0 means the backend's MaxRows. Results do
	// not depend on it.
	BatchSize int
	// Mapped makes Open map the file (gguf.Mapped) for a device that
	// reads the weights from host memory (Device.HostWeights), which it
	// otherwise reads into resident memory (gguf.Resident). Results do
	// not depend on it.
	Mapped bool
}

// Model is a loaded decoder-only transformer: its architecture, its
// weights where the GGUF file holds them, and the backend that computes
// it. Its methods are safe for concurrent use; Forward calls run one at a
// time.
type Model struct {
	w       *Weights
	arch    Arch
	file    *gguf.File
	ownFile bool
	dev     Device
	be      Backend
	kv      kvcache.DType
	batch   int

	mu     sync.Mutex // serialises Forward; guards rows and closed
	rows   []Row
	closed bool

	digestOnce sync.Once
	digest     [32]byte
}

// Open opens the GGUF file at path and loads it. The Model owns the file
// and releases it on Close. A device that reads the weights from host
// memory (Device.HostWeights) gets the file read into resident memory
// (gguf.Resident: huge pages on Linux, where its passes read the weights
// faster than from a mapping), unless opt.Mapped; any other device gets
// it mapped (gguf.Mapped), since it copies the weights once.
func Open(path string, opt Options) (*Model, error) {
	if opt.Device == nil {
		return nil, ErrNoDevice
	}
	mem := gguf.Mapped
	if opt.Device.HostWeights() && !opt.Mapped {
		mem = gguf.Resident
	}
	f, err := gguf.OpenIn(path, mem)
	if err != nil {
		return nil, err
	}
	m, err := Load(f, opt)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.ownFile = true
	return m, nil
}

// Load binds a model to the tensors of f, which must stay open while the
// Model is used, and hands them to opt.Device. Weight matrices are not
// copied by the front; norms, biases and RoPE factors (vectors) are
// decoded to float32.
func Load(f *gguf.File, opt Options) (*Model, error) {
	if opt.Device == nil {
		return nil, ErrNoDevice
	}
	a, cfg, err := readArch(f)
	if err != nil {
		return nil, err
	}
	if opt.KV != kvcache.DTypeF16 && opt.KV != kvcache.DTypeF32 {
		return nil, fmt.Errorf("%w: kv dtype %v", ErrUnsupported, opt.KV)
	}
	w, err := bindWeights(f, a, cfg)
	if err != nil {
		return nil, err
	}
	be, err := opt.Device.Bind(w, opt.KV)
	if err != nil {
		return nil, err
	}
	m := &Model{w: w, arch: a, file: f, dev: opt.Device, be: be, kv: opt.KV, batch: opt.BatchSize}
	if m.batch <= 0 || m.batch > be.MaxRows() {
		m.batch = be.MaxRows()
	}
	return m, nil
}

// readArch looks up f's architecture and reads its hyperparameters.
func readArch(f *gguf.File) (Arch, *Config, error) {
	name, err := f.Meta.String(KeyArchitecture)
	if err != nil {
		return Arch{}, nil, &HParamError{Key: KeyArchitecture, Err: err}
	}
	a, ok := LookupArch(name)
	if !ok {
		return Arch{}, nil, &HParamError{Key: KeyArchitecture, Err: ErrUnknownArch,
			Reason: fmt.Sprintf("%q is not supported (supported: %v)", name, Archs())}
	}
	cfg, err := readConfig(&f.Meta, a)
	if err != nil {
		return Arch{}, nil, err
	}
	return a, cfg, nil
}

// Config returns the model's hyperparameters.
func (m *Model) Config() Config { return m.w.Config }

// File returns the GGUF file the model reads its weights from.
func (m *Model) File() *gguf.File { return m.file }

// Device returns the device that computes the model.
func (m *Model) Device() Device { return m.dev }

// Numerics names the arithmetic of the model's backend (the identity's
// engine field).
func (m *Model) Numerics() string { return m.be.Numerics() }

// DecodeBatch returns the most decode tokens one Forward call should take
// (Backend.DecodeBatch), or -1 for no preference.
func (m *Model) DecodeBatch() int { return m.be.DecodeBatch() }

// MaxRows returns the most tokens one backend call computes
// (Options.BatchSize, at most the backend's MaxRows).
func (m *Model) MaxRows() int { return m.batch }

// KVType returns the element type of the model's KV caches.
func (m *Model) KVType() kvcache.DType { return m.kv }

// Close releases the backend and the file (if Open opened it). Sequences
// of the model must not be used afterwards.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	err := m.be.Close()
	if m.ownFile {
		err = errors.Join(err, m.file.Close())
	}
	return err
}

// float32sDigest returns the first 16 hex digits of BLAKE3 over the
// little-endian bytes of v, domain separated.
func float32sDigest(v []float32) string {
	h := blake3.New()
	h.Write([]byte("muser/engine/float32s/v1\x00"))
	var b [4]byte
	for _, x := range v {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Backend returns the backend that computes the model (for tests and tools
// that look at one backend's internals).
func (m *Model) Backend() Backend { return m.be }
