package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/muserhq/muser/pack"
)

func digest(b byte) pack.Digest {
	var d pack.Digest
	for i := range d {
		d[i] = b + byte(i)
	}
	return d
}

func testIdentity() pack.Identity {
	return pack.Identity{Format: 1, Model: digest(4), Arch: "llama;layers=5", Tokenizer: digest(5),
		Template: digest(6), Quant: "F32", KV: "f16;block=64;layout=lkv1", Engine: "muser-cpu/1"}
}

func sampleMessages() []Message {
	return []Message{
		&Offer{Manifest: []byte("manifest bytes"), Seal: pack.Seal{Producer: "alpha", Generation: 1 << 60, Nonce: [pack.NonceSize]byte{1, 2, 3}, MAC: digest(9)}},
		&Offer{Manifest: []byte{}, Seal: pack.Seal{Producer: "b", Generation: 1}},
		&Need{Transfer: 42, Chunks: []pack.Digest{digest(1), digest(2)}},
		&Need{Transfer: 7, Chunks: []pack.Digest{}},
		&Done{Pack: digest(3), Chunks: 12, Bytes: 1 << 33},
		&Refuse{Code: CodeIdentityMismatch, Receipt: "r-0123", Detail: `field "model": got ab.., want cd..`},
		&Pull{Ref: "0123abcd"},
		&Prefill{
			Identity: testIdentity(),
			Salt:     []byte("tenant"), Tokens: []int32{1, 2, 3, 2147483647}, Have: 2,
		},
		&Prefill{Identity: testIdentity(), Tokens: []int32{}, Salt: []byte{}},
		&Chunks{Transfer: 99},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		t.Run(m.Type().String(), func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, m); err != nil {
				t.Fatal(err)
			}
			frame := append([]byte(nil), buf.Bytes()...)
			got, err := Read(&buf, m.Type())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("got %+v, want %+v", got, m)
			}
			if buf.Len() != 0 {
				t.Fatalf("%d bytes left after the frame", buf.Len())
			}
			d, err := Decode(frame)
			if err != nil || !reflect.DeepEqual(d, m) {
				t.Fatalf("Decode = %+v, %v; want %+v", d, err, m)
			}
		})
	}
}

func frameOf(t Type, payload []byte) []byte {
	b := []byte{byte(t)}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

func TestMalformed(t *testing.T) {
	valid := func(m Message) []byte {
		b, err := Append(nil, m)
		if err != nil {
			panic(err)
		}
		return b
	}
	offer := valid(&Offer{Manifest: []byte("abc"), Seal: pack.Seal{Producer: "alpha", Generation: 5}})
	prefill := valid(&Prefill{Identity: testIdentity(), Tokens: []int32{1, 2}})
	tests := []struct {
		desc  string
		in    []byte
		field string // "" matches any
		want  string
	}{
		{"short header", []byte{1, 0}, "", "truncated frame header"},
		{"unknown type", frameOf(0x7f, nil), "", "unknown frame type"},
		{"over bound", binary.LittleEndian.AppendUint32([]byte{byte(TypeDone)}, 1000), "length", "over the limit"},
		{"huge need", binary.LittleEndian.AppendUint32([]byte{byte(TypeNeed)}, 0xffffffff), "length", "over the limit"},
		{"payload short", frameOf(TypeDone, make([]byte, 10)), "pack ID", "remain"},
		{"payload long", frameOf(TypeNeed, make([]byte, 13)), "", "after the last field"},
		{"zero generation", func() []byte {
			sb, _ := (&pack.Seal{Producer: "alpha"}).MarshalBinary()
			p := binary.LittleEndian.AppendUint32(nil, 0)
			p = binary.LittleEndian.AppendUint32(p, uint32(len(sb)))
			return frameOf(TypeOffer, append(p, sb...))
		}(), "seal", "generation 0"},
		{"manifest length past end", func() []byte {
			b := append([]byte(nil), offer...)
			binary.LittleEndian.PutUint32(b[HeaderSize:], 1000)
			return b
		}(), "manifest", "remain"},
		{"bad seal", func() []byte {
			b := append([]byte(nil), offer...)
			binary.LittleEndian.PutUint16(b[HeaderSize+4+3+4:], 300) // producer length
			return b
		}(), "seal", ""},
		{"need count past end", frameOf(TypeNeed, binary.LittleEndian.AppendUint32(make([]byte, 8), 3)), "chunk count", "remain"},
		{"need count over limit", frameOf(TypeNeed, binary.LittleEndian.AppendUint32(make([]byte, 8), MaxChunks+1)), "chunk count", "over the limit"},
		{"refuse ok", frameOf(TypeRefuse, []byte{0, 0, 0, 0, 0}), "code", "code ok"},
		{"pull empty", frameOf(TypePull, []byte{0}), "pack reference", "empty"},
		{"pull not hex", frameOf(TypePull, []byte{2, 'x', 'y'}), "pack reference", "hex"},
		{"negative token", func() []byte {
			b := append([]byte(nil), prefill...)
			binary.LittleEndian.PutUint32(b[len(b)-4-8:], 0x80000000)
			return b
		}(), "token", "not a valid"},
		{"have over tokens", func() []byte {
			b := append([]byte(nil), prefill...)
			binary.LittleEndian.PutUint32(b[len(b)-4:], 3)
			return b
		}(), "have", "exceeds"},
		{"invalid identity", func() []byte {
			b := append([]byte(nil), prefill...)
			b[HeaderSize+4] = 0 // format 0
			return b
		}(), "identity", "format"},
		{"chunk via Decode", frameOf(TypeChunk, make([]byte, 40)), "", "not a message frame"},
		{"trailing bytes", append(append([]byte(nil), offer...), 0), "length", "frame holds"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := Decode(tt.in)
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("Decode = %v, want a *FrameError", err)
			}
			if tt.field != "" && fe.Field != tt.field {
				t.Fatalf("field = %q (%v), want %q", fe.Field, err, tt.field)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			if !errors.Is(err, ErrMalformed) || !errors.Is(err, pack.ErrCorrupt) {
				t.Fatalf("%v does not wrap ErrMalformed and pack.ErrCorrupt", err)
			}
		})
	}
}

func TestEncodeRefusesOverLimit(t *testing.T) {
	tests := []struct {
		desc  string
		m     Message
		field string
	}{
		{"zero generation", &Offer{Seal: pack.Seal{Producer: "a"}}, "seal"},
		{"no producer", &Offer{Seal: pack.Seal{Generation: 1}}, "seal"},
		{"salt", &Prefill{Identity: testIdentity(), Salt: make([]byte, MaxSalt+1)}, "salt"},
		{"negative token", &Prefill{Identity: testIdentity(), Tokens: []int32{-1}}, "token"},
		{"have", &Prefill{Identity: testIdentity(), Tokens: []int32{1}, Have: 2}, "have"},
		{"invalid identity", &Prefill{}, "identity"},
		{"arch", &Prefill{Identity: func() pack.Identity {
			id := testIdentity()
			id.Arch = strings.Repeat("a", pack.MaxIdentityString+1)
			return id
		}()}, "identity"},
		{"pull ref", &Pull{Ref: strings.Repeat("a", MaxPackRef+1)}, "pack reference"},
		{"refuse ok", &Refuse{}, "code"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := Append(nil, tt.m)
			var fe *FrameError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("Append = %v, want a *FrameError on field %q", err, tt.field)
			}
		})
	}
	// Text too long for a refusal is cut, not refused.
	long := &Refuse{Code: CodeInternal, Detail: strings.Repeat("é", MaxDetail)}
	b, err := Append(nil, long)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := m.(*Refuse).Detail; len(d) > MaxDetail || !strings.HasPrefix(long.Detail, d) {
		t.Fatalf("detail of %d bytes, want a prefix of at most %d", len(d), MaxDetail)
	}
}

func TestReadExpectations(t *testing.T) {
	var buf bytes.Buffer
	_ = Write(&buf, &Done{Pack: digest(1)})
	if _, err := Read(&buf, TypeNeed); !errors.Is(err, ErrUnexpected) {
		t.Fatalf("Read(want need) of a done frame = %v, want ErrUnexpected", err)
	}
	buf.Reset()
	_ = Write(&buf, &Refuse{Code: CodeBadSeal, Detail: "x"})
	m, err := Read(&buf, TypeNeed)
	if err != nil || m.Type() != TypeRefuse {
		t.Fatalf("Read(want need) of a refusal = %v, %v; want the refusal", m, err)
	}
	if _, err := Read(&buf); err != io.EOF {
		t.Fatalf("Read at the end = %v, want io.EOF", err)
	}
	buf.Reset()
	b, _ := Append(nil, &Need{Transfer: 1, Chunks: []pack.Digest{digest(1)}})
	buf.Write(b[:len(b)-3])
	if _, err := Read(&buf); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("Read of a truncated frame = %v, want a truncation", err)
	}
}

func TestChunkFrames(t *testing.T) {
	var buf bytes.Buffer
	data := []byte("kv bytes of one block")
	h, err := AppendChunkHeader(nil, digest(7), len(data))
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(h)
	buf.Write(data)
	id, n, err := ReadChunkHeader(&buf)
	if err != nil || id != digest(7) || n != len(data) {
		t.Fatalf("ReadChunkHeader = %x, %d, %v; want %x, %d", id, n, err, digest(7), len(data))
	}
	if got := buf.Next(n); !bytes.Equal(got, data) {
		t.Fatalf("chunk bytes %q, want %q", got, data)
	}
	if _, _, err := ReadChunkHeader(&buf); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
	if _, err := AppendChunkHeader(nil, digest(1), MaxChunkSize+1); err == nil {
		t.Fatal("AppendChunkHeader over the limit succeeded")
	}
	if _, _, err := ReadChunkHeader(bytes.NewReader(frameOf(TypeChunk, make([]byte, 31)))); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short chunk frame: %v, want ErrMalformed", err)
	}
	if _, _, err := ReadChunkHeader(bytes.NewReader(frameOf(TypeChunks, make([]byte, 8)))); !errors.Is(err, ErrUnexpected) {
		t.Fatalf("message on a chunk stream: %v, want ErrUnexpected", err)
	}
	// A stream that ends inside the chunk ID is a truncated frame; one
	// that fails there (the sender reset it) reports that failure, not a
	// malformed frame.
	whole := frameOf(TypeChunk, make([]byte, 32+8))
	if _, _, err := ReadChunkHeader(bytes.NewReader(whole[:HeaderSize+10])); !errors.Is(err, ErrMalformed) {
		t.Fatalf("stream ending inside the chunk ID: %v, want ErrMalformed", err)
	}
	reset := errors.New("stream reset by the peer")
	r := io.MultiReader(bytes.NewReader(whole[:HeaderSize+10]), iotest.ErrReader(reset))
	if _, _, err := ReadChunkHeader(r); !errors.Is(err, reset) || errors.Is(err, ErrMalformed) {
		t.Fatalf("stream failing inside the chunk ID: %v, want the stream's error and not ErrMalformed", err)
	}
}

func TestErrorPredicates(t *testing.T) {
	for c := range codeNames {
		e := &Error{Code: c, Peer: "beta"}
		if got := errors.Is(e, pack.ErrRefused); got != c.Refusal() {
			t.Errorf("errors.Is(%s, ErrRefused) = %v, want %v", c, got, c.Refusal())
		}
		wrapped := fmt.Errorf("push: %w", e)
		if !errors.Is(wrapped, &Error{Code: c}) || CodeOf(wrapped) != c {
			t.Errorf("code %s not recognised through wrapping", c)
		}
	}
	if !errors.Is(&Error{Code: CodeChunkDigest}, pack.ErrCorrupt) {
		t.Error("chunk-digest is not pack.ErrCorrupt")
	}
	if got := (&Error{Code: CodeReplay, Remote: true, Peer: "b", Receipt: "r1", Detail: "nonce"}).Error(); got != `replay (remote, peer "b"): nonce [receipt r1]` {
		t.Errorf("Error() = %q", got)
	}
	if got := Code(0x999).String(); got != "code-0x999" {
		t.Errorf("unknown code prints %q", got)
	}
}

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the committed fuzz seed corpora")

// TestWriteFuzzSeeds rewrites testdata/fuzz/FuzzDecode from sampleMessages.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("run with -update-seeds to rewrite testdata/fuzz/FuzzDecode")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, m := range sampleMessages() {
		b, err := Append(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%02d-%s", i, m.Type())), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzDecode checks that Decode never panics and that every frame it
// accepts re-encodes to the same bytes (the encoding is canonical).
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		out, err := Append(nil, m)
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("re-encoding changed the frame:\n got %x\nwant %x", out, data)
		}
	})
}

// FuzzReadChunkHeader checks the chunk-stream reader never panics and
// never reports a size over the limit.
func FuzzReadChunkHeader(f *testing.F) {
	h, _ := AppendChunkHeader(nil, digest(1), 10)
	f.Add(append(h, make([]byte, 10)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			_, n, err := ReadChunkHeader(r)
			if err != nil {
				return
			}
			if n < 0 || n > MaxChunkSize {
				t.Fatalf("size %d out of range", n)
			}
			if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
				return
			}
		}
	})
}

// TestPullRefEncoding: a pull's pack reference is 1 to 64 lower-case hex
// digits (docs/replication.md, "Frames"); anything else is malformed.
// Append must refuse such a reference as Decode refuses the frame, so this
// node never sends a frame its peer refuses as malformed with a receipt
// blaming this node.
func TestPullRefEncoding(t *testing.T) {
	for _, ref := range []string{"zz", "0123ABCD", "ab/cd", "g"} {
		t.Run(ref, func(t *testing.T) {
			frame := frameOf(TypePull, append([]byte{byte(len(ref))}, ref...))
			var fe *FrameError
			if _, err := Decode(frame); !errors.As(err, &fe) || fe.Field != "pack reference" {
				t.Fatalf("Decode(%x) = %v, want a *FrameError on field %q", frame, err, "pack reference")
			}
			if b, err := Append(nil, &Pull{Ref: ref}); !errors.As(err, &fe) || fe.Field != "pack reference" {
				t.Fatalf("Append(pull %q) = frame %x, %v; want a *FrameError on field %q", ref, b, err, "pack reference")
			}
		})
	}
}

// TestRefuseDetailUTF8: a refusal's detail is UTF-8 (docs/replication.md,
// "Frames"): a frame whose detail is not is malformed, and the encoder,
// which cuts an over-long detail rather than refusing it, repairs a
// detail that is not UTF-8 so that what it sends decodes.
func TestRefuseDetailUTF8(t *testing.T) {
	refuse := func(detail string) []byte {
		p := binary.LittleEndian.AppendUint16(nil, uint16(CodeInternal))
		p = append(p, 2, 'r', '1')
		p = binary.LittleEndian.AppendUint16(p, uint16(len(detail)))
		return frameOf(TypeRefuse, append(p, detail...))
	}
	for _, tt := range []struct{ desc, detail string }{
		{"invalid byte", "bad \xff byte"},
		{"sequence cut short", "caf\xc3"},
		{"surrogate", "\xed\xa0\x80"},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			frame := refuse(tt.detail)
			var fe *FrameError
			if _, err := Decode(frame); !errors.As(err, &fe) || fe.Field != "detail" {
				t.Fatalf("Decode(%x) = %v, want a *FrameError on field %q", frame, err, "detail")
			}
			b, err := Append(nil, &Refuse{Code: CodeInternal, Detail: tt.detail})
			if err != nil {
				t.Fatal(err)
			}
			m, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode of an encoded refusal with detail %q: %v", tt.detail, err)
			}
			if want := strings.ToValidUTF8(tt.detail, "\uFFFD"); m.(*Refuse).Detail != want {
				t.Fatalf("detail %q, want %q", m.(*Refuse).Detail, want)
			}
		})
	}
}

// A frame announced large but cut short costs the reader about what
// arrived, not what was announced: the payload buffer grows with the
// bytes.
func TestReadAllocatesWhatArrives(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  Type
		sent int // payload bytes sent before the stream ends
	}{
		{"offer, 10 bytes", TypeOffer, 10},
		{"offer, 1 MiB", TypeOffer, 1 << 20},
		{"need, 100 bytes", TypeNeed, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			announced := maxPayload(tc.typ)
			frame := make([]byte, HeaderSize+tc.sent)
			frame[0] = byte(tc.typ)
			binary.LittleEndian.PutUint32(frame[1:], uint32(announced))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Read(bytes.NewReader(frame))
			runtime.ReadMemStats(&after)
			var fe *FrameError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), "truncated") {
				t.Fatalf("Read of a cut frame = %v, want a truncated *FrameError", err)
			}
			// Growth by doubling allocates about twice what arrived; the
			// race detector's runtime adds its own. Before, the reader
			// allocated what was announced (160 MiB for an offer).
			if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(8*tc.sent+1<<20); got > limit {
				t.Fatalf("reading %d of %d announced bytes allocated %d bytes, want at most %d", tc.sent, announced, got, limit)
			}
		})
	}
}
