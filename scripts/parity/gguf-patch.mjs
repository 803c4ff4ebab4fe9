// Rewrites the metadata of a vocab-only GGUF file (no tensors): each entry
// of `set` replaces the key's value, or is appended when the key is absent.
// Only what the parity vectors need: string and bool values.
import fs from "node:fs";

const TYPE_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8};
const T_BOOL = 7, T_STRING = 8, T_ARRAY = 9;

function skipValue(buf, off, type) {
  if (type in TYPE_SIZE) return off + TYPE_SIZE[type];
  if (type === T_STRING) return off + 8 + Number(buf.readBigUInt64LE(off));
  if (type === T_ARRAY) {
    const et = buf.readUInt32LE(off);
    const n = Number(buf.readBigUInt64LE(off + 4));
    off += 12;
    if (et in TYPE_SIZE) return off + n * TYPE_SIZE[et];
    for (let i = 0; i < n; i++) off = skipValue(buf, off, et);
    return off;
  }
  throw new Error(`unknown GGUF type ${type} at offset ${off}`);
}

function encodeKV(key, value) {
  const k = Buffer.from(key, "utf8");
  const head = Buffer.alloc(8 + k.length + 4);
  head.writeBigUInt64LE(BigInt(k.length), 0);
  k.copy(head, 8);
  if (typeof value === "string") {
    head.writeUInt32LE(T_STRING, 8 + k.length);
    const v = Buffer.from(value, "utf8");
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(v.length));
    return Buffer.concat([head, len, v]);
  }
  if (typeof value === "boolean") {
    head.writeUInt32LE(T_BOOL, 8 + k.length);
    return Buffer.concat([head, Buffer.from([value ? 1 : 0])]);
  }
  throw new Error(`cannot encode ${key}=${value}`);
}

export function patchGGUF(src, dst, set) {
  const buf = fs.readFileSync(src);
  if (buf.toString("latin1", 0, 4) !== "GGUF" || buf.readUInt32LE(4) !== 3) throw new Error(`${src}: not a GGUF v3 file`);
  if (buf.readBigUInt64LE(8) !== 0n) throw new Error(`${src}: has tensors; only vocab-only files can be patched`);
  const nKV = Number(buf.readBigUInt64LE(16));
  const parts = [];
  const pending = new Map(Object.entries(set));
  let off = 24;
  for (let i = 0; i < nKV; i++) {
    const start = off;
    const klen = Number(buf.readBigUInt64LE(off));
    const key = buf.toString("utf8", off + 8, off + 8 + klen);
    off += 8 + klen;
    const type = buf.readUInt32LE(off);
    off = skipValue(buf, off + 4, type);
    if (pending.has(key)) {
      parts.push(encodeKV(key, pending.get(key)));
      pending.delete(key);
    } else {
      parts.push(buf.subarray(start, off));
    }
  }
  for (const [key, value] of pending) parts.push(encodeKV(key, value));
  const header = Buffer.alloc(24);
  buf.copy(header, 0, 0, 16);
  header.writeBigUInt64LE(BigInt(nKV + pending.size), 16);
  let out = Buffer.concat([header, ...parts]);
  const pad = (32 - (out.length % 32)) % 32;
  out = Buffer.concat([out, Buffer.alloc(pad)]);
  fs.writeFileSync(dst, out);
}
