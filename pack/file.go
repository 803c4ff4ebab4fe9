package pack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/zeebo/blake3"
)

// Export file layout constants (docs/kvpack.md, "Export file").
const (
	// FileMagic opens an export file.
	FileMagic = "MUSERKVP"
	// FileEndMagic precedes an export file's trailer digest.
	FileEndMagic = "MUSEREND"
)

// DistinctChunks returns m's chunks without repeats, in order of first
// appearance: the order an export file stores them in.
func DistinctChunks(m *Manifest) []ChunkRef {
	seen := make(map[Digest]bool, len(m.Chunks))
	var out []ChunkRef
	for _, c := range m.Chunks {
		if !seen[c.ID] {
			seen[c.ID] = true
			out = append(out, c)
		}
	}
	return out
}

// FileWriter writes one pack as a self-describing export file: header,
// manifest, seal, each distinct chunk once, and a trailer digest over all
// of it. After its first failure every call returns that error (the
// writer is poisoned), so a half-written file is never finished.
type FileWriter struct {
	w     io.Writer
	h     *blake3.Hasher
	want  []ChunkRef
	next  int
	err   error
	close bool
}

// NewFileWriter writes the header, manifest and seal to w. The manifest
// must decode and its root must check.
func NewFileWriter(w io.Writer, manifest []byte, seal Seal) (*FileWriter, error) {
	m, err := DecodeManifest(manifest)
	if err != nil {
		return nil, err
	}
	if err := m.CheckRoot(); err != nil {
		return nil, err
	}
	sb, err := seal.MarshalBinary()
	if err != nil {
		return nil, err
	}
	fw := &FileWriter{w: w, h: hFile.Clone(), want: DistinctChunks(m)}
	var hdr []byte
	hdr = append(hdr, FileMagic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, FormatVersion)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(manifest)))
	fw.write(hdr)
	fw.write(manifest)
	fw.write(binary.LittleEndian.AppendUint32(nil, uint32(len(sb))))
	fw.write(sb)
	fw.write(binary.LittleEndian.AppendUint32(nil, uint32(len(fw.want))))
	if fw.err != nil {
		return nil, fw.err
	}
	return fw, nil
}

func (fw *FileWriter) write(p []byte) {
	if fw.err != nil {
		return
	}
	_, _ = fw.h.Write(p)
	if _, err := fw.w.Write(p); err != nil {
		fw.err = fmt.Errorf("export file: %w", err)
	}
}

// Next returns the chunk the writer expects next, and false when every
// chunk has been written.
func (fw *FileWriter) Next() (ChunkRef, bool) {
	if fw.next >= len(fw.want) {
		return ChunkRef{}, false
	}
	return fw.want[fw.next], true
}

// WriteChunk writes the next distinct chunk. It re-hashes data and refuses
// bytes that are not the chunk the manifest names (a *DigestError), so an
// export never carries a chunk that would fail import.
func (fw *FileWriter) WriteChunk(data []byte) error {
	if fw.err != nil {
		return fw.err
	}
	want, ok := fw.Next()
	if !ok {
		fw.err = fmt.Errorf("%w: export file: more chunks written than the manifest has (%d)", ErrInvalid, len(fw.want))
		return fw.err
	}
	if got := ChunkID(data); got != want.ID || uint32(len(data)) != want.Size {
		fw.err = &DigestError{Kind: DigestChunk, Object: fmt.Sprintf("chunk %d of the export", fw.next), Expected: want.ID, Actual: got}
		return fw.err
	}
	fw.write(binary.LittleEndian.AppendUint32(nil, want.Size))
	fw.write(data)
	fw.next++
	return fw.err
}

// Close writes the trailer. It fails if chunks are missing. It does not
// close the underlying writer.
func (fw *FileWriter) Close() error {
	if fw.err != nil {
		return fw.err
	}
	if fw.close {
		return nil
	}
	if fw.next != len(fw.want) {
		fw.err = fmt.Errorf("%w: export file: %d of %d chunks written", ErrInvalid, fw.next, len(fw.want))
		return fw.err
	}
	fw.write([]byte(FileEndMagic))
	var d Digest
	fw.h.Sum(d[:0])
	if fw.err == nil {
		if _, err := fw.w.Write(d[:]); err != nil {
			fw.err = fmt.Errorf("export file: %w", err)
		}
	}
	fw.close = true
	return fw.err
}

// FileReader reads an export file, verifying as it goes: the manifest
// decodes and its root checks before the first chunk; each chunk hashes to
// its ID before Next returns it; the trailer digest covers every byte.
// Nothing is allocated for a length before the length is bounded.
type FileReader struct {
	r        io.Reader
	h        *blake3.Hasher
	off      int64
	manifest []byte
	m        *Manifest
	seal     Seal
	want     []ChunkRef
	next     int
	err      error
}

// NewFileReader reads and checks the header, manifest and seal of an
// export file. The seal is decoded but not verified: that needs the key.
func NewFileReader(r io.Reader) (*FileReader, error) {
	fr := &FileReader{r: r, h: hFile.Clone()}
	magic := fr.read("magic", 8)
	if fr.err == nil && string(magic) != FileMagic {
		fr.fail("magic", fmt.Sprintf("got %q, want %q (not a muser pack export)", magic, FileMagic), nil, 8)
	}
	if v := fr.u32("version"); fr.err == nil && v != FormatVersion {
		fr.fail("version", fmt.Sprintf("unsupported version %d (this build reads %d)", v, FormatVersion), nil, 4)
	}
	ml := fr.u32("manifest length")
	switch {
	case fr.err != nil:
	case ml == 0:
		// Outside 1..MaxManifestBytes without exceeding anything: the
		// layout is wrong, not a limit.
		fr.fail("manifest length", "is 0 (no manifest)", nil, 4)
	case uint64(ml) > MaxManifestBytes:
		fr.err = &LimitError{Object: "export file", Field: "manifest length", Got: uint64(ml), Max: MaxManifestBytes}
	}
	fr.manifest = fr.read("manifest", int(ml))
	if fr.err == nil {
		m, err := DecodeManifest(fr.manifest)
		if err == nil {
			err = m.CheckRoot()
		}
		if err != nil {
			fr.err = fmt.Errorf("export file: %w", err)
		}
		fr.m = m
	}
	sl := fr.u32("seal length")
	if fr.err == nil && sl > MaxSealBytes {
		fr.err = &LimitError{Object: "export file", Field: "seal length", Got: uint64(sl), Max: MaxSealBytes}
	}
	sb := fr.read("seal", int(sl))
	if fr.err == nil {
		s, err := DecodeSeal(sb)
		if err != nil {
			fr.err = fmt.Errorf("export file: %w", err)
		}
		fr.seal = s
	}
	n := fr.u32("chunk count")
	if fr.err == nil {
		fr.want = DistinctChunks(fr.m)
		if int(n) != len(fr.want) {
			fr.fail("chunk count", fmt.Sprintf("%d, but the manifest names %d distinct chunks", n, len(fr.want)), nil, 4)
		}
	}
	if fr.err != nil {
		return nil, fr.err
	}
	return fr, nil
}

// fail records a FormatError for the field that ended back bytes ago.
func (fr *FileReader) fail(field, problem string, cause error, back int) {
	if fr.err == nil {
		fr.err = &FormatError{Object: "export file", Field: field, Offset: fr.off - int64(back), Problem: problem, Err: cause}
	}
}

// read reads n bytes, growing its buffer only as bytes arrive, so a huge
// declared length on a short input costs no memory.
func (fr *FileReader) read(field string, n int) []byte {
	if fr.err != nil {
		return nil
	}
	const step = 1 << 20
	buf := make([]byte, 0, min(n, step))
	for len(buf) < n {
		k := min(n-len(buf), step)
		if cap(buf)-len(buf) < k {
			buf = append(buf, make([]byte, k)...)[:len(buf)]
		}
		got, err := io.ReadFull(fr.r, buf[len(buf):len(buf)+k])
		buf = buf[:len(buf)+got]
		fr.off += int64(got)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				fr.fail(field, fmt.Sprintf("file ends after %d of %d bytes", len(buf), n), io.ErrUnexpectedEOF, 0)
			} else {
				fr.err = fmt.Errorf("export file: reading %s: %w", field, err)
			}
			return nil
		}
	}
	_, _ = fr.h.Write(buf)
	return buf
}

func (fr *FileReader) u32(field string) uint32 {
	if p := fr.read(field, 4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

// Manifest returns the decoded manifest.
func (fr *FileReader) Manifest() *Manifest { return fr.m }

// ManifestBytes returns the manifest's canonical bytes as stored.
func (fr *FileReader) ManifestBytes() []byte { return fr.manifest }

// PackID returns the ID of the pack the file carries.
func (fr *FileReader) PackID() Digest { return PackID(fr.manifest) }

// Seal returns the decoded, unverified seal.
func (fr *FileReader) Seal() Seal { return fr.seal }

// Next reads the next distinct chunk and verifies it against its ID. It
// returns io.EOF after the last one. The returned bytes stay valid until
// the next call.
func (fr *FileReader) Next() (ChunkRef, []byte, error) {
	if fr.err != nil {
		return ChunkRef{}, nil, fr.err
	}
	if fr.next >= len(fr.want) {
		return ChunkRef{}, nil, io.EOF
	}
	want := fr.want[fr.next]
	sz := fr.u32("chunk size")
	if fr.err == nil && sz != want.Size {
		if sz > MaxChunkBytes {
			fr.err = &LimitError{Object: "export file", Field: fmt.Sprintf("chunk %d size", fr.next), Got: uint64(sz), Max: MaxChunkBytes}
		} else {
			fr.fail(fmt.Sprintf("chunk %d size", fr.next), fmt.Sprintf("%d, but the manifest says %d", sz, want.Size), nil, 4)
		}
	}
	data := fr.read(fmt.Sprintf("chunk %d", fr.next), int(sz))
	if fr.err != nil {
		return ChunkRef{}, nil, fr.err
	}
	if got := ChunkID(data); got != want.ID {
		fr.err = &DigestError{Kind: DigestChunk, Object: fmt.Sprintf("chunk %d of the export file", fr.next), Expected: want.ID, Actual: got}
		return ChunkRef{}, nil, fr.err
	}
	fr.next++
	return want, data, nil
}

// Finish checks the trailer after the last chunk: the end magic, the file
// digest, and that nothing follows.
func (fr *FileReader) Finish() error {
	if fr.err != nil {
		return fr.err
	}
	if fr.next != len(fr.want) {
		return fmt.Errorf("%w: export file: Finish after %d of %d chunks", ErrInvalid, fr.next, len(fr.want))
	}
	end := fr.read("end magic", 8)
	if fr.err == nil && string(end) != FileEndMagic {
		fr.fail("end magic", fmt.Sprintf("got %q, want %q", end, FileEndMagic), nil, 8)
	}
	var want Digest
	fr.h.Sum(want[:0])
	if fr.err != nil {
		return fr.err
	}
	var got Digest
	if _, err := io.ReadFull(fr.r, got[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			fr.fail("file digest", "file ends inside the trailer digest", io.ErrUnexpectedEOF, 0)
		} else {
			fr.err = fmt.Errorf("export file: reading file digest: %w", err)
		}
		return fr.err
	}
	fr.off += 32
	if got != want {
		fr.err = &DigestError{Kind: DigestFile, Object: "export file", Expected: got, Actual: want}
		return fr.err
	}
	// Only the end of the input proves that nothing follows: a read that
	// fails says nothing about what is left.
	var extra [1]byte
	switch n, err := io.ReadFull(fr.r, extra[:]); {
	case n != 0:
		fr.fail("end", "unexpected bytes after the trailer", nil, 0)
	case !errors.Is(err, io.EOF):
		fr.err = fmt.Errorf("export file: reading past the trailer: %w", err)
	}
	return fr.err
}

// ReadFile reads a whole export file from b, verifying everything, and
// returns its manifest bytes, seal and chunks (keyed by ID). It is the
// simple form of FileReader for tests and small files.
func ReadFile(b []byte) (manifest []byte, seal Seal, chunks map[Digest][]byte, err error) {
	fr, err := NewFileReader(bytes.NewReader(b))
	if err != nil {
		return nil, Seal{}, nil, err
	}
	chunks = make(map[Digest][]byte)
	for {
		ref, data, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, Seal{}, nil, err
		}
		chunks[ref.ID] = bytes.Clone(data)
	}
	if err := fr.Finish(); err != nil {
		return nil, Seal{}, nil, err
	}
	return fr.ManifestBytes(), fr.Seal(), chunks, nil
}
