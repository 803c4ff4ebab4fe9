package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/muserhq/muser/pack"
)

// Type is a frame type.
type Type uint8

// Frame types (docs/replication.md, "Frames"): each names the message its
// frame carries.
const (
	TypeOffer   Type = 0x01
	TypeNeed    Type = 0x02
	TypeDone    Type = 0x03
	TypeRefuse  Type = 0x04
	TypePull    Type = 0x05
	TypePrefill Type = 0x06
	TypeChunks  Type = 0x10
	TypeChunk   Type = 0x11
)

// Protocol limits. A frame over its limit is refused before its payload is
// read; docs/replication.md lists them.
const (
	// HeaderSize is the size of a frame header: type and length.
	HeaderSize = 5
	// MaxManifest bounds the manifest bytes of an offer: the pack format's
	// own bound.
	MaxManifest = pack.MaxManifestBytes
	// MaxChunkSize bounds one chunk's bytes on the wire: the pack format's
	// own bound.
	MaxChunkSize = pack.MaxChunkBytes
	// MaxChunks bounds the chunk IDs of a Need message: a manifest has at
	// most one chunk per token.
	MaxChunks = pack.MaxTokens
	// MaxTokens bounds the tokens of a prefill request.
	MaxTokens = pack.MaxTokens
	// MaxSalt bounds a tenant salt.
	MaxSalt = 1024
	// MaxDetail bounds the detail text of a refusal.
	MaxDetail = 8 << 10
	// MaxReceipt bounds a receipt ID.
	MaxReceipt = 128
	// MaxPackRef bounds a pulled pack reference (a hex ID or prefix).
	MaxPackRef = 64
	// MaxIdentity bounds the encoded identity of a prefill request.
	MaxIdentity = pack.MaxIdentityBytes
)

// String returns the frame type's name as docs/replication.md spells it.
func (t Type) String() string {
	switch t {
	case TypeOffer:
		return "offer"
	case TypeNeed:
		return "need"
	case TypeDone:
		return "done"
	case TypeRefuse:
		return "refuse"
	case TypePull:
		return "pull"
	case TypePrefill:
		return "prefill"
	case TypeChunks:
		return "chunks"
	case TypeChunk:
		return "chunk"
	}
	return fmt.Sprintf("type-%#02x", uint8(t))
}

// maxPayload returns the payload bound of a frame type, or -1 for an
// unknown type.
func maxPayload(t Type) int {
	switch t {
	case TypeOffer:
		return 4 + MaxManifest + 4 + pack.MaxSealBytes
	case TypeNeed:
		return 8 + 4 + MaxChunks*32
	case TypeDone:
		return 32 + 4 + 8
	case TypeRefuse:
		return 2 + 1 + MaxReceipt + 2 + MaxDetail
	case TypePull:
		return 1 + MaxPackRef
	case TypePrefill:
		return identityMax + 2 + MaxSalt + 4 + 4*MaxTokens + 4
	case TypeChunks:
		return 8
	case TypeChunk:
		return 32 + MaxChunkSize
	}
	return -1
}

// Message is a protocol message other than a chunk.
type Message interface {
	// Type returns the frame type that carries the message.
	Type() Type
	// appendPayload appends the canonical payload encoding.
	appendPayload(b []byte) []byte
	// decodePayload decodes a whole payload.
	decodePayload(p []byte) error
	// check reports a field the encoding cannot carry.
	check() error
}

// Offer proposes a pack: its canonical manifest and the seal that binds
// its pack ID to the sender (the seal's producer), a generation and a
// nonce under the key of the link from sender to receiver.
type Offer struct {
	Manifest []byte
	Seal     pack.Seal
}

// Need answers an offer with the distinct chunk IDs the receiver lacks and
// the transfer ID the sender's chunk streams must carry.
type Need struct {
	Transfer uint64
	Chunks   []pack.Digest
}

// Done reports a published pack: its ID and what the transfer moved.
type Done struct {
	Pack   pack.Digest
	Chunks uint32
	Bytes  uint64
}

// Refuse reports a refusal or failure: its code, the receipt the refusing
// side recorded, and what went wrong.
type Refuse struct {
	Code    Code
	Receipt string
	Detail  string
}

// Pull asks the server to offer the pack named by Ref, a full hex pack ID
// or a unique prefix of one.
type Pull struct {
	Ref string
}

// Prefill asks a producer to prefill Tokens under (Identity, Salt) and
// offer the resulting pack. Have is the number of leading tokens the
// consumer already holds (a hint; the Need answer is authoritative).
type Prefill struct {
	Identity pack.Identity
	Salt     []byte
	Tokens   []int32
	Have     uint32
}

// Chunks opens a chunk stream: every chunk frame after it belongs to the
// transfer named here.
type Chunks struct {
	Transfer uint64
}

// Type returns TypeOffer.
func (*Offer) Type() Type { return TypeOffer }

// Type returns TypeNeed.
func (*Need) Type() Type { return TypeNeed }

// Type returns TypeDone.
func (*Done) Type() Type { return TypeDone }

// Type returns TypeRefuse.
func (*Refuse) Type() Type { return TypeRefuse }

// Type returns TypePull.
func (*Pull) Type() Type { return TypePull }

// Type returns TypePrefill.
func (*Prefill) Type() Type { return TypePrefill }

// Type returns TypeChunks.
func (*Chunks) Type() Type { return TypeChunks }

// Append appends m's whole frame (header and payload) to b. A field over
// its limit is an error, never a silently truncated frame.
func Append(b []byte, m Message) ([]byte, error) {
	if err := m.check(); err != nil {
		return b, err
	}
	start := len(b)
	b = append(b, byte(m.Type()), 0, 0, 0, 0)
	b = m.appendPayload(b)
	n := len(b) - start - HeaderSize
	if n > maxPayload(m.Type()) {
		return b[:start], &FrameError{Type: m.Type(), Err: fmt.Errorf("payload of %d bytes over the limit of %d", n, maxPayload(m.Type()))}
	}
	binary.LittleEndian.PutUint32(b[start+1:], uint32(n))
	return b, nil
}

// Write writes m as one frame.
func Write(w io.Writer, m Message) error {
	b, err := Append(nil, m)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// readHeader reads a frame header and checks the type is known and the
// length within its bound.
func readHeader(r io.Reader) (Type, int, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, 0, &FrameError{Err: errors.New("truncated frame header")}
		}
		return 0, 0, err
	}
	t := Type(h[0])
	n := binary.LittleEndian.Uint32(h[1:])
	limit := maxPayload(t)
	if limit < 0 {
		return t, 0, &FrameError{Type: t, Err: errors.New("unknown frame type")}
	}
	if uint64(n) > uint64(limit) {
		return t, 0, &FrameError{Type: t, Field: "length", Err: fmt.Errorf("%d bytes over the limit of %d", n, limit)}
	}
	return t, int(n), nil
}

// newMessage returns an empty message of type t, or nil for chunk frames
// and unknown types.
func newMessage(t Type) Message {
	switch t {
	case TypeOffer:
		return new(Offer)
	case TypeNeed:
		return new(Need)
	case TypeDone:
		return new(Done)
	case TypeRefuse:
		return new(Refuse)
	case TypePull:
		return new(Pull)
	case TypePrefill:
		return new(Prefill)
	case TypeChunks:
		return new(Chunks)
	}
	return nil
}

// Read reads one frame and decodes its message. If want is not empty, a
// frame of another type is refused with ErrUnexpected — except Refuse,
// which is always returned so the caller can surface the peer's refusal. A
// chunk frame is never returned by Read (it is ErrUnexpected): chunk
// streams are read with ReadChunkHeader. io.EOF is returned only at a
// frame boundary.
func Read(r io.Reader, want ...Type) (Message, error) {
	t, n, err := readHeader(r)
	if err != nil {
		return nil, err
	}
	m := newMessage(t)
	if m == nil || (len(want) > 0 && t != TypeRefuse && !typeIn(t, want)) {
		return nil, fmt.Errorf("%w: got a %s frame, want %v", ErrUnexpected, t, want)
	}
	p, err := readPayload(r, n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, &FrameError{Type: t, Err: fmt.Errorf("truncated: %d payload bytes announced", n)}
		}
		return nil, err
	}
	if err := m.decodePayload(p); err != nil {
		return nil, err
	}
	return m, nil
}

// firstPayloadBuffer is the buffer readPayload starts with.
const firstPayloadBuffer = 64 << 10

// readPayload reads the n payload bytes of a frame, growing its buffer (by
// doubling) as they arrive: a peer that announces a large frame (an offer
// may be 160 MiB) and sends little makes this side allocate about twice
// what it sent, not what it announced.
func readPayload(r io.Reader, n int) ([]byte, error) {
	p := make([]byte, 0, min(n, firstPayloadBuffer))
	for len(p) < n {
		if len(p) == cap(p) {
			p = slices.Grow(p, min(n-len(p), cap(p)))
		}
		k, err := io.ReadFull(r, p[len(p):min(n, cap(p))])
		p = p[:len(p)+k]
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Decode decodes one whole frame held in b (and nothing after it).
func Decode(b []byte) (Message, error) {
	if len(b) < HeaderSize {
		return nil, &FrameError{Err: errors.New("truncated frame header")}
	}
	t, n, err := readHeader(bytes.NewReader(b[:HeaderSize]))
	if err != nil {
		return nil, err
	}
	if len(b)-HeaderSize != n {
		return nil, &FrameError{Type: t, Field: "length", Err: fmt.Errorf("header says %d payload bytes, frame holds %d", n, len(b)-HeaderSize)}
	}
	m := newMessage(t)
	if m == nil {
		return nil, &FrameError{Type: t, Err: errors.New("not a message frame")}
	}
	if err := m.decodePayload(b[HeaderSize:]); err != nil {
		return nil, err
	}
	return m, nil
}

func typeIn(t Type, ts []Type) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// ChunkHeaderSize is the size of a chunk frame's header and chunk ID.
const ChunkHeaderSize = HeaderSize + 32

// AppendChunkHeader appends the header of a chunk frame carrying size bytes
// of the chunk id; the caller writes the chunk's bytes after it.
func AppendChunkHeader(b []byte, id pack.Digest, size int) ([]byte, error) {
	if size < 0 || size > MaxChunkSize {
		return b, &FrameError{Type: TypeChunk, Field: "size", Err: fmt.Errorf("%d bytes, the limit is %d", size, MaxChunkSize)}
	}
	b = append(b, byte(TypeChunk))
	b = binary.LittleEndian.AppendUint32(b, uint32(32+size))
	return append(b, id[:]...), nil
}

// ReadChunkHeader reads the header of a chunk frame and returns the chunk
// ID and the number of chunk bytes that follow, which the caller must read
// next. io.EOF means the stream ended cleanly at a frame boundary.
func ReadChunkHeader(r io.Reader) (pack.Digest, int, error) {
	var id pack.Digest
	t, n, err := readHeader(r)
	if err != nil {
		return id, 0, err
	}
	if t != TypeChunk {
		return id, 0, fmt.Errorf("%w: got a %s frame on a chunk stream", ErrUnexpected, t)
	}
	if n < 32 {
		return id, 0, &FrameError{Type: t, Field: "length", Err: fmt.Errorf("%d bytes cannot hold a chunk ID", n)}
	}
	if _, err := io.ReadFull(r, id[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return id, 0, &FrameError{Type: t, Field: "chunk ID", Err: errors.New("truncated")}
		}
		// The stream failed (a reset, the connection lost): that is
		// the cause, not a malformed frame.
		return id, 0, err
	}
	return id, n - 32, nil
}

// Payload codecs. Every decoder consumes its payload exactly.

func (m *Offer) appendPayload(b []byte) []byte {
	b = appendBytes32(b, m.Manifest)
	// check has verified that the seal encodes.
	sb, _ := m.Seal.MarshalBinary()
	return appendBytes32(b, sb)
}

func (m *Offer) decodePayload(p []byte) error {
	d := decoder{t: TypeOffer, p: p}
	m.Manifest = d.bytes32("manifest", MaxManifest)
	if sb := d.bytes32("seal", pack.MaxSealBytes); d.err == nil {
		seal, err := pack.DecodeSeal(sb)
		if err != nil {
			d.fail("seal", err)
		}
		m.Seal = seal
	}
	if d.err == nil && m.Seal.Generation == 0 {
		d.fail("seal", errors.New("generation 0"))
	}
	return d.finish()
}

func (m *Need) appendPayload(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, m.Transfer)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.Chunks)))
	for _, c := range m.Chunks {
		b = append(b, c[:]...)
	}
	return b
}

func (m *Need) decodePayload(p []byte) error {
	d := decoder{t: TypeNeed, p: p}
	m.Transfer = d.u64("transfer")
	n := d.count("chunk count", MaxChunks, 32)
	if d.err == nil {
		m.Chunks = make([]pack.Digest, n)
		for i := range m.Chunks {
			d.fixed("chunk ID", m.Chunks[i][:])
		}
	}
	return d.finish()
}

func (m *Done) appendPayload(b []byte) []byte {
	b = append(b, m.Pack[:]...)
	b = binary.LittleEndian.AppendUint32(b, m.Chunks)
	return binary.LittleEndian.AppendUint64(b, m.Bytes)
}

func (m *Done) decodePayload(p []byte) error {
	d := decoder{t: TypeDone, p: p}
	d.fixed("pack ID", m.Pack[:])
	m.Chunks = d.u32("chunks")
	m.Bytes = d.u64("bytes")
	return d.finish()
}

func (m *Refuse) appendPayload(b []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(m.Code))
	b = appendString8(b, truncate(m.Receipt, MaxReceipt))
	// The detail is UTF-8 on the wire: repair it before cutting it, so
	// the cut lands on a character boundary.
	return appendString16(b, truncate(strings.ToValidUTF8(m.Detail, "\uFFFD"), MaxDetail))
}

func (m *Refuse) decodePayload(p []byte) error {
	d := decoder{t: TypeRefuse, p: p}
	m.Code = Code(d.u16("code"))
	m.Receipt = d.string8("receipt", MaxReceipt)
	m.Detail = d.string16("detail", MaxDetail)
	if d.err == nil && m.Code == CodeOK {
		d.fail("code", errors.New("a refusal cannot carry code ok"))
	}
	if d.err == nil && !utf8.ValidString(m.Detail) {
		d.fail("detail", errors.New("not valid UTF-8"))
	}
	return d.finish()
}

func (m *Pull) appendPayload(b []byte) []byte { return appendString8(b, m.Ref) }

func (m *Pull) decodePayload(p []byte) error {
	d := decoder{t: TypePull, p: p}
	m.Ref = d.string8("pack reference", MaxPackRef)
	if d.err == nil {
		if err := checkPackRef(m.Ref); err != nil {
			d.fail("pack reference", err)
		}
	}
	return d.finish()
}

// checkPackRef says what is wrong with a pull's pack reference, which
// must be 1 to MaxPackRef lower-case hex digits; the encoder and the
// decoder both apply it.
func checkPackRef(ref string) error {
	switch {
	case len(ref) == 0:
		return errors.New("empty")
	case len(ref) > MaxPackRef:
		return fmt.Errorf("%d bytes, want 1..%d", len(ref), MaxPackRef)
	}
	for i := 0; i < len(ref); i++ {
		if c := ref[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("%q is not lower-case hex", ref)
		}
	}
	return nil
}

// identityMax bounds the wire form of an identity: its length and its
// canonical encoding (docs/kvpack.md).
const identityMax = 4 + MaxIdentity

func (m *Prefill) appendPayload(b []byte) []byte {
	// check has verified that the identity encodes.
	idb, _ := m.Identity.MarshalBinary()
	b = appendBytes32(b, idb)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(m.Salt)))
	b = append(b, m.Salt...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.Tokens)))
	for _, t := range m.Tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return binary.LittleEndian.AppendUint32(b, m.Have)
}

func (m *Prefill) decodePayload(p []byte) error {
	d := decoder{t: TypePrefill, p: p}
	if idb := d.bytes32("identity", MaxIdentity); d.err == nil {
		id, err := pack.DecodeIdentity(idb)
		if err != nil {
			d.fail("identity", err)
		}
		m.Identity = id
	}
	if n := int(d.u16("salt length")); d.err == nil {
		if n > MaxSalt {
			d.fail("salt", fmt.Errorf("%d bytes, the limit is %d", n, MaxSalt))
		} else {
			m.Salt = append([]byte{}, d.take("salt", n)...)
		}
	}
	n := d.count("token count", MaxTokens, 4)
	if d.err == nil {
		m.Tokens = make([]int32, n)
		for i := range m.Tokens {
			v := d.u32("token")
			if v > math.MaxInt32 && d.err == nil {
				d.fail("token", fmt.Errorf("token %d is %d, not a valid (non-negative int32) token", i, v))
			}
			m.Tokens[i] = int32(v)
		}
	}
	m.Have = d.u32("have")
	if d.err == nil && int64(m.Have) > int64(len(m.Tokens)) {
		d.fail("have", fmt.Errorf("%d exceeds the %d tokens requested", m.Have, len(m.Tokens)))
	}
	return d.finish()
}

func (m *Chunks) appendPayload(b []byte) []byte {
	return binary.LittleEndian.AppendUint64(b, m.Transfer)
}

func (m *Chunks) decodePayload(p []byte) error {
	d := decoder{t: TypeChunks, p: p}
	m.Transfer = d.u64("transfer")
	return d.finish()
}

// Encoding helpers.

func appendBytes32(b, v []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

func appendString8(b []byte, s string) []byte {
	b = append(b, byte(len(s)))
	return append(b, s...)
}

func appendString16(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i]
}

// decoder reads a payload field by field; the first fault sticks and names
// its field.
type decoder struct {
	t   Type
	p   []byte
	err error
}

func (d *decoder) fail(field string, err error) {
	if d.err == nil {
		d.err = &FrameError{Type: d.t, Field: field, Err: err}
	}
}

func (d *decoder) take(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.p) {
		d.fail(field, fmt.Errorf("needs %d bytes, %d remain", n, len(d.p)))
		return nil
	}
	v := d.p[:n:n]
	d.p = d.p[n:]
	return v
}

func (d *decoder) fixed(field string, dst []byte) {
	if v := d.take(field, len(dst)); v != nil {
		copy(dst, v)
	}
}

func (d *decoder) u16(field string) uint16 {
	if v := d.take(field, 2); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) u32(field string) uint32 {
	if v := d.take(field, 4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64(field string) uint64 {
	if v := d.take(field, 8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

// count reads a uint32 element count, checks it against limit and against
// the bytes that remain (each element takes size bytes), before anything
// is allocated.
func (d *decoder) count(field string, limit, size int) int {
	n := d.u32(field)
	if d.err != nil {
		return 0
	}
	if uint64(n) > uint64(limit) {
		d.fail(field, fmt.Errorf("%d over the limit of %d", n, limit))
		return 0
	}
	if uint64(n)*uint64(size) > uint64(len(d.p)) {
		d.fail(field, fmt.Errorf("%d elements need %d bytes, %d remain", n, uint64(n)*uint64(size), len(d.p)))
		return 0
	}
	return int(n)
}

func (d *decoder) bytes32(field string, limit int) []byte {
	n := d.u32(field + " length")
	if d.err != nil {
		return nil
	}
	if uint64(n) > uint64(limit) {
		d.fail(field, fmt.Errorf("%d bytes over the limit of %d", n, limit))
		return nil
	}
	v := d.take(field, int(n))
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}

func (d *decoder) string8(field string, limit int) string {
	n := 0
	if v := d.take(field+" length", 1); v != nil {
		n = int(v[0])
	}
	return d.str(field, n, limit)
}

func (d *decoder) string16(field string, limit int) string {
	return d.str(field, int(d.u16(field+" length")), limit)
}

func (d *decoder) str(field string, n, limit int) string {
	if d.err != nil {
		return ""
	}
	if n > limit {
		d.fail(field, fmt.Errorf("%d bytes over the limit of %d", n, limit))
		return ""
	}
	return string(d.take(field, n))
}

func (d *decoder) finish() error {
	if d.err == nil && len(d.p) != 0 {
		d.fail("", fmt.Errorf("%d bytes after the last field", len(d.p)))
	}
	return d.err
}

// Encoder-side checks: each refuses what its decoder would refuse.

func (m *Offer) check() error {
	if len(m.Manifest) > MaxManifest {
		return &FrameError{Type: TypeOffer, Field: "manifest", Err: fmt.Errorf("%d bytes over the limit of %d", len(m.Manifest), MaxManifest)}
	}
	if m.Seal.Generation == 0 {
		return &FrameError{Type: TypeOffer, Field: "seal", Err: errors.New("generation 0")}
	}
	if _, err := m.Seal.MarshalBinary(); err != nil {
		return &FrameError{Type: TypeOffer, Field: "seal", Err: err}
	}
	return nil
}

func (m *Need) check() error {
	if len(m.Chunks) > MaxChunks {
		return &FrameError{Type: TypeNeed, Field: "chunk count", Err: fmt.Errorf("%d over the limit of %d", len(m.Chunks), MaxChunks)}
	}
	return nil
}

func (m *Done) check() error { return nil }

func (m *Refuse) check() error {
	if m.Code == CodeOK {
		return &FrameError{Type: TypeRefuse, Field: "code", Err: errors.New("a refusal cannot carry code ok")}
	}
	return nil
}

func (m *Pull) check() error {
	if err := checkPackRef(m.Ref); err != nil {
		return &FrameError{Type: TypePull, Field: "pack reference", Err: err}
	}
	return nil
}

func (m *Prefill) check() error {
	if _, err := m.Identity.MarshalBinary(); err != nil {
		return &FrameError{Type: TypePrefill, Field: "identity", Err: err}
	}
	switch {
	case len(m.Salt) > MaxSalt:
		return &FrameError{Type: TypePrefill, Field: "salt", Err: fmt.Errorf("%d bytes over the limit of %d", len(m.Salt), MaxSalt)}
	case len(m.Tokens) > MaxTokens:
		return &FrameError{Type: TypePrefill, Field: "token count", Err: fmt.Errorf("%d over the limit of %d", len(m.Tokens), MaxTokens)}
	case int64(m.Have) > int64(len(m.Tokens)):
		return &FrameError{Type: TypePrefill, Field: "have", Err: fmt.Errorf("%d exceeds the %d tokens requested", m.Have, len(m.Tokens))}
	}
	for i, t := range m.Tokens {
		if t < 0 {
			return &FrameError{Type: TypePrefill, Field: "token", Err: fmt.Errorf("token %d is %d, negative", i, t)}
		}
	}
	return nil
}

func (m *Chunks) check() error { return nil }
