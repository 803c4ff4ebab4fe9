"""A small GGUF v3 writer and reader, enough for the default model's recipe.

Layout written (all integers little-endian):
  magic "GGUF", version u32 = 3, tensor count u64, metadata count u64,
  metadata: key (u64 length + UTF-8 bytes), value type u32, value,
  tensor infos: name, n_dims u32, dims u64 each (ggml order: dims[0] is the
  row length), ggml type u32, offset u64 (relative to the data section),
  padding to the alignment (32), then tensor data, each tensor starting at an
  aligned offset.

Only the value types the recipe needs are written: u32, i32, f32, bool,
string, and arrays of string, f32 and i32. Tensors are F32 (type 0) or F16
(type 1). The reader parses what the writer writes (and general GGUF v3 files
with those value types) so the recipe can check its own output; it also
dequantizes Q8_0 and Q4_K tensors (types 8 and 12), so the block drafter's recipe can load a
quantized target.
"""

import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
ALIGN = 32

T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)

GGML_F32 = 0
GGML_F16 = 1
GGML_Q8_0 = 8
GGML_Q4_K = 12
_Q8_0_BLOCK = np.dtype([("d", "<f2"), ("q", "i1", (32,))])
_Q4_K_BLOCK = np.dtype([("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", (12,)), ("qs", "u1", (128,))])


def _q4_k(blocks):
    """Dequantizes Q4_K super-blocks of 256 values: eight sub-blocks of 32,
    each with a 6-bit scale and min (packed in 12 bytes) times the block's
    d and dmin; value = d*scale*q - dmin*min, q a 4-bit nibble (the low
    nibbles of 32 bytes are one sub-block, their high nibbles the next)."""
    sc = blocks["scales"].astype(np.int32)
    n = len(blocks)
    scale = np.empty((n, 8), np.int32)
    mn = np.empty((n, 8), np.int32)
    scale[:, :4] = sc[:, 0:4] & 63
    mn[:, :4] = sc[:, 4:8] & 63
    scale[:, 4:] = (sc[:, 8:12] & 0xF) | ((sc[:, 0:4] >> 6) << 4)
    mn[:, 4:] = (sc[:, 8:12] >> 4) | ((sc[:, 4:8] >> 6) << 4)
    d = blocks["d"].astype(np.float32)[:, None] * scale
    m = blocks["dmin"].astype(np.float32)[:, None] * mn
    qs = blocks["qs"].reshape(n, 4, 32)
    q = np.stack((qs & 0xF, qs >> 4), axis=2).reshape(n, 8, 32).astype(np.float32)
    return (d[:, :, None] * q - m[:, :, None]).reshape(n, 256)

_SCALAR = {
    T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I", T_INT32: "<i",
    T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d",
}


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


class Writer:
    def __init__(self):
        self.kv = []  # (key, type, payload bytes)
        self.tensors = []  # (name, dims (ggml order), ggml type, bytes)
        self._keys = set()
        self._names = set()

    def _add(self, key, typ, payload):
        if key in self._keys:
            raise ValueError(f"duplicate metadata key {key}")
        self._keys.add(key)
        self.kv.append((key, typ, payload))

    def u32(self, key, v):
        self._add(key, T_UINT32, struct.pack("<I", v))

    def i32(self, key, v):
        self._add(key, T_INT32, struct.pack("<i", v))

    def f32(self, key, v):
        self._add(key, T_FLOAT32, struct.pack("<f", v))

    def bool(self, key, v):
        self._add(key, T_BOOL, struct.pack("<?", bool(v)))

    def string(self, key, v):
        self._add(key, T_STRING, _str(v))

    def strings(self, key, vs):
        self._add(key, T_ARRAY, struct.pack("<IQ", T_STRING, len(vs)) + b"".join(_str(s) for s in vs))

    def f32s(self, key, vs):
        self._add(key, T_ARRAY, struct.pack("<IQ", T_FLOAT32, len(vs)) + np.asarray(vs, dtype="<f4").tobytes())

    def i32s(self, key, vs):
        self._add(key, T_ARRAY, struct.pack("<IQ", T_INT32, len(vs)) + np.asarray(vs, dtype="<i4").tobytes())

    def tensor(self, name, arr, ggml_type=GGML_F32):
        """Adds a tensor from a numpy array in PyTorch (row-major) shape; the
        GGUF dims are the reversed shape."""
        if name in self._names:
            raise ValueError(f"duplicate tensor {name}")
        self._names.add(name)
        dt = {GGML_F32: "<f4", GGML_F16: "<f2"}[ggml_type]
        a = np.ascontiguousarray(arr, dtype=dt)
        self.tensors.append((name, list(reversed(a.shape)), ggml_type, a.tobytes()))

    def write(self, path):
        out = bytearray()
        out += GGUF_MAGIC + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for key, typ, payload in self.kv:
            out += _str(key) + struct.pack("<I", typ) + payload
        offset = 0
        offsets = []
        for name, dims, typ, data in self.tensors:
            offsets.append(offset)
            out += _str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            out += struct.pack("<IQ", typ, offset)
            offset += len(data)
            offset += (-offset) % ALIGN
        out += b"\0" * ((-len(out)) % ALIGN)
        base = len(out)
        for (name, dims, typ, data), off in zip(self.tensors, offsets):
            out += b"\0" * (base + off - len(out))
            out += data
        with open(path, "wb") as f:
            f.write(out)


def read(path):
    """Returns (metadata dict, {name: (ggml type, dims, numpy array or raw bytes)})."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(n):
        nonlocal pos
        if pos + n > len(buf):
            raise ValueError(f"{path}: truncated at offset {pos}")
        b = buf[pos:pos + n]
        pos += n
        return b

    def u(fmt):
        return struct.unpack(fmt, take(struct.calcsize(fmt)))[0]

    def s():
        return take(u("<Q")).decode("utf-8")

    def val(t):
        if t in _SCALAR:
            return u(_SCALAR[t])
        if t == T_STRING:
            return s()
        if t == T_ARRAY:
            et, n = u("<I"), u("<Q")
            return [val(et) for _ in range(n)]
        raise ValueError(f"{path}: unknown value type {t}")

    if take(4) != GGUF_MAGIC:
        raise ValueError(f"{path}: not a GGUF file")
    version, nt, nkv = u("<I"), u("<Q"), u("<Q")
    if version != 3:
        raise ValueError(f"{path}: version {version}, want 3")
    meta = {}
    for _ in range(nkv):
        k = s()
        meta[k] = val(u("<I"))
    infos = []
    for _ in range(nt):
        name = s()
        nd = u("<I")
        dims = [u("<Q") for _ in range(nd)]
        infos.append((name, dims, u("<I"), u("<Q")))
    align = meta.get("general.alignment", ALIGN)
    base = pos + (-pos) % align
    tensors = {}
    for name, dims, typ, off in infos:
        n = int(np.prod(dims))
        if typ == GGML_F32:
            arr = np.frombuffer(buf, dtype="<f4", count=n, offset=base + off).reshape(list(reversed(dims)))
        elif typ == GGML_F16:
            arr = np.frombuffer(buf, dtype="<f2", count=n, offset=base + off).reshape(list(reversed(dims)))
        elif typ == GGML_Q8_0:
            # Blocks of 32: an f16 scale d, then 32 int8 q; value = d * q.
            blocks = np.frombuffer(buf, dtype=_Q8_0_BLOCK, count=n // 32, offset=base + off)
            vals = blocks["q"].astype(np.float32) * blocks["d"].astype(np.float32)[:, None]
            arr = vals.reshape(list(reversed(dims)))
        elif typ == GGML_Q4_K:
            blocks = np.frombuffer(buf, dtype=_Q4_K_BLOCK, count=n // 256, offset=base + off)
            arr = _q4_k(blocks).reshape(list(reversed(dims)))
        else:
            arr = None
        tensors[name] = (typ, dims, arr)
    return meta, tensors
