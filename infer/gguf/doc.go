// Package gguf reads and writes GGUF files, the model format of ggml and
// llama.cpp.
//
// # Reading
//
// Open maps a file read-only and parses its header, metadata and tensor
// infos; OpenIn does the same with the file's bytes held as a Memory
// says: mapped (Open's), or read once into read-only resident memory in
// transparent huge pages (Resident, what the CPU engine reads its weights
// from); Parse parses bytes in memory. Tensor data is never copied after
// that: File.Data returns a slice of where the bytes are held. Metadata is copied to
// the heap (string arrays into one backing string per array, numeric
// arrays as packed little-endian bytes) so it outlives Close. GGUF
// versions 2 and 3 are read, little-endian only.
//
// Metadata keeps file order and offers typed accessors (String, Uint32,
// Uint64, Int32, Float32, Bool, Strings, Float32s, Int32s, and Or variants
// for optional keys). A missing key gives a *KeyError wrapping
// ErrMissingKey; a value of the wrong type one wrapping ErrWrongType that
// names the wanted and actual types.
//
// # Hardening
//
// The parser treats its input as hostile. Every count, length, dimension,
// offset and alignment is checked, with overflow-checked arithmetic, before
// it is used or anything is allocated, and nothing in the input can make
// it panic. A malformed file gives a *FormatError naming the field at
// fault and its byte offset; it matches ErrMalformed with errors.Is and
// wraps a more specific sentinel (ErrTruncated, ErrLimit, ErrDuplicate,
// ErrAlignment, ErrUnknownType, ErrRange, ErrInvalid, ErrMagic,
// ErrVersion). The limits:
//
//   - tensor count at most MaxTensors (2^20), metadata entry count at most
//     MaxKVs (2^20), and each count no more than the rest of the file can
//     hold (25 bytes per tensor info, 14 per entry at least);
//   - strings at most MaxStringLength (1 GiB) and no longer than the rest
//     of the file; keys at most MaxKeyLength (64 KiB) and not empty;
//     tensor names 1 to MaxTensorName (63) bytes, as ggml requires;
//   - arrays at most MaxArrayLength (2^30) elements and no more than the
//     rest of the file can hold (8 bytes per string element at least);
//     arrays of arrays are refused, as llama.cpp refuses them; a string
//     array's bytes total less than 4 GiB; booleans are 0 or 1;
//   - keys and tensor names unique;
//   - general.alignment, if present, a uint32 power of two;
//   - at most MaxDims (4) dimensions, each in [0, 2^63), with an element
//     count and byte size below 2^63; a known ggml type (ggml.Type.Known)
//     whose block size divides the row length;
//   - each tensor's offset a multiple of the alignment, its data within
//     the file, and no two tensors' data overlapping.
//
// Heap use while parsing is bounded by a small multiple (about ten at
// worst, for a file made of minimal entries) of the size of the file's
// header, metadata and tensor infos; tensor data is never touched.
//
// A file mapped by Open must not be truncated by another process while in
// use: reading a page past the new end raises SIGBUS. A Resident file is
// read whole when it is opened and is unaffected by later changes to the
// file.
//
// # Writing
//
// Builder assembles a file: metadata set with Set, SetString, SetUint32,
// SetArray and friends (kept in the order set), and tensors added with
// AddTensor (already-encoded bytes), AddFloat32 (float32 values encoded
// with ggml.Quantize) or AddTensorFunc (bytes produced at write time, one
// tensor in memory at a time). WriteTo and Bytes produce GGUF version 3;
// WriteFile writes atomically (temporary file, fsync, parse-back check,
// rename, directory fsync). The layout is llama.cpp's: tensor data in
// order, each at an offset aligned to general.alignment (default 32) and
// padded with zeros, so re-encoding a file llama.cpp wrote gives the same
// bytes. NewBuilderFrom starts from an existing File.
//
// # Identity fields
//
// WeightsDigest computes the model field of the pack identity from the
// tensors alone (names, types, shapes, data; not metadata or layout).
// QuantName names the weight quantization (the quant field), and
// TemplateDigest / ChatTemplateDigest the chat template (the template
// field). Their exact encodings are documented on each function.
package gguf
