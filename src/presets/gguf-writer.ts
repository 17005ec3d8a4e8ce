/**
 * Minimal GGUF v3 writer: typed metadata key/values plus F32 tensors.
 *
 * Layout (all little-endian), per https://github.com/ggml-org/ggml/blob/master/docs/gguf.md:
 *   magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
 *   kv_count   x (string key, u32 value_type, value)
 *   tensor_count x (string name, u32 n_dims, u64 dims[n_dims], u32 ggml_type, u64 offset)
 *   zero padding to `alignment`, then tensor data, each tensor starting on an aligned offset.
 * Strings are (u64 byte length, UTF-8 bytes) with no terminator.
 */
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import { endianness } from "node:os";

const GGUF_MAGIC = "GGUF";
const GGUF_VERSION = 3;
/** llama.cpp's default; written explicitly as `general.alignment` too when the caller wants it. */
export const GGUF_DEFAULT_ALIGNMENT = 32;
/** GGML_MAX_NAME in ggml.h: longer tensor names are rejected by the loader. */
const GGML_MAX_NAME = 64;
/** GGML_MAX_DIMS in ggml.h. */
const GGML_MAX_DIMS = 4;
const GGML_TYPE_F32 = 0;

/** GGUF metadata value type ids (gguf_type in gguf.h). A plain object, not an enum, so the
 * file also runs under Node's type stripping. */
const ValueType = {
  U32: 4,
  I32: 5,
  F32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
} as const;
type NumberArrayType = typeof ValueType.U32 | typeof ValueType.I32 | typeof ValueType.F32;

export type GgufValue =
  | { readonly type: "u32"; readonly value: number }
  | { readonly type: "i32"; readonly value: number }
  | { readonly type: "f32"; readonly value: number }
  | { readonly type: "bool"; readonly value: boolean }
  | { readonly type: "string"; readonly value: string }
  | { readonly type: "string[]"; readonly value: readonly string[] }
  | { readonly type: "u32[]"; readonly value: ArrayLike<number> }
  | { readonly type: "i32[]"; readonly value: ArrayLike<number> }
  | { readonly type: "f32[]"; readonly value: ArrayLike<number> };

/** Small constructors so call sites read like `gguf.u32(4096)` rather than object literals. */
export const gguf = {
  u32: (value: number): GgufValue => ({ type: "u32", value }),
  i32: (value: number): GgufValue => ({ type: "i32", value }),
  f32: (value: number): GgufValue => ({ type: "f32", value }),
  bool: (value: boolean): GgufValue => ({ type: "bool", value }),
  str: (value: string): GgufValue => ({ type: "string", value }),
  strArray: (value: readonly string[]): GgufValue => ({ type: "string[]", value }),
  u32Array: (value: ArrayLike<number>): GgufValue => ({ type: "u32[]", value }),
  i32Array: (value: ArrayLike<number>): GgufValue => ({ type: "i32[]", value }),
  f32Array: (value: ArrayLike<number>): GgufValue => ({ type: "f32[]", value }),
} as const;

/** Keys are written in insertion order. */
export type GgufMetadata = Readonly<Record<string, GgufValue>>;

export interface GgufTensor {
  readonly name: string;
  /** GGUF order: dims[0] is the fastest-varying (input) dimension, as in ggml's ne[]. */
  readonly dims: readonly number[];
  readonly data: Float32Array;
}

export interface GgufFile {
  readonly metadata: GgufMetadata;
  readonly tensors: readonly GgufTensor[];
  /** Defaults to 32; must match `general.alignment` when that key is present. */
  readonly alignment?: number;
}

export interface GgufWriteResult {
  readonly path: string;
  readonly bytes: number;
  /** Hex SHA-256 of the whole file, computed while writing (no second read). */
  readonly sha256: string;
}

/**
 * Growable little-endian byte sink for the header. The header holds only metadata and
 * tensor infos (a few hundred KB at most), so one in-memory buffer is fine; tensor data
 * is streamed straight from each Float32Array instead.
 */
class ByteSink {
  private buf = Buffer.alloc(64 * 1024);
  private len = 0;

  get length(): number {
    return this.len;
  }

  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.len + n));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }

  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }

  u32(v: number): void {
    this.reserve(4);
    this.buf.writeUInt32LE(v, this.len);
    this.len += 4;
  }

  i32(v: number): void {
    this.reserve(4);
    this.buf.writeInt32LE(v, this.len);
    this.len += 4;
  }

  f32(v: number): void {
    this.reserve(4);
    this.buf.writeFloatLE(v, this.len);
    this.len += 4;
  }

  u64(v: number | bigint): void {
    this.reserve(8);
    this.buf.writeBigUInt64LE(BigInt(v), this.len);
    this.len += 8;
  }

  bool(v: boolean): void {
    this.reserve(1);
    this.buf.writeUInt8(v ? 1 : 0, this.len);
    this.len += 1;
  }

  string(s: string): void {
    const utf8 = Buffer.from(s, "utf8");
    this.u64(utf8.length);
    this.bytes(utf8);
  }

  zeros(n: number): void {
    this.reserve(n);
    this.buf.fill(0, this.len, this.len + n);
    this.len += n;
  }

  toBuffer(): Buffer {
    return this.buf.subarray(0, this.len);
  }
}

function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}

function writeNumberArray(sink: ByteSink, elemType: NumberArrayType, values: ArrayLike<number>): void {
  sink.u32(elemType);
  sink.u64(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number; // i < length, so defined
    if (elemType === ValueType.U32) sink.u32(v);
    else if (elemType === ValueType.I32) sink.i32(v);
    else sink.f32(v);
  }
}

function writeValue(sink: ByteSink, value: GgufValue): void {
  switch (value.type) {
    case "u32":
      sink.u32(ValueType.U32);
      sink.u32(value.value);
      return;
    case "i32":
      sink.u32(ValueType.I32);
      sink.i32(value.value);
      return;
    case "f32":
      sink.u32(ValueType.F32);
      sink.f32(value.value);
      return;
    case "bool":
      sink.u32(ValueType.BOOL);
      sink.bool(value.value);
      return;
    case "string":
      sink.u32(ValueType.STRING);
      sink.string(value.value);
      return;
    case "string[]":
      sink.u32(ValueType.ARRAY);
      sink.u32(ValueType.STRING);
      sink.u64(value.value.length);
      for (const s of value.value) sink.string(s);
      return;
    case "u32[]":
      sink.u32(ValueType.ARRAY);
      writeNumberArray(sink, ValueType.U32, value.value);
      return;
    case "i32[]":
      sink.u32(ValueType.ARRAY);
      writeNumberArray(sink, ValueType.I32, value.value);
      return;
    case "f32[]":
      sink.u32(ValueType.ARRAY);
      writeNumberArray(sink, ValueType.F32, value.value);
      return;
  }
}

function validateTensor(t: GgufTensor): void {
  if (Buffer.byteLength(t.name, "utf8") >= GGML_MAX_NAME) {
    throw new Error(`tensor name too long for ggml (max ${GGML_MAX_NAME - 1} bytes): ${t.name}`);
  }
  if (t.dims.length < 1 || t.dims.length > GGML_MAX_DIMS) {
    throw new Error(`tensor ${t.name}: ${t.dims.length} dims, ggml supports 1..${GGML_MAX_DIMS}`);
  }
  const elements = t.dims.reduce((a, d) => a * d, 1);
  if (elements !== t.data.length) {
    throw new Error(`tensor ${t.name}: dims [${t.dims.join(", ")}] hold ${elements} elements, data has ${t.data.length}`);
  }
}

/** Builds everything up to (and including) the padding before the tensor data section. */
function buildHeader(file: GgufFile, alignment: number): { header: Buffer; offsets: number[] } {
  const sink = new ByteSink();
  const keys = Object.keys(file.metadata);

  sink.bytes(Buffer.from(GGUF_MAGIC, "ascii"));
  sink.u32(GGUF_VERSION);
  sink.u64(file.tensors.length);
  sink.u64(keys.length);

  for (const key of keys) {
    const value = file.metadata[key];
    if (value === undefined) continue; // unreachable: key came from Object.keys
    sink.string(key);
    writeValue(sink, value);
  }

  // Offsets are relative to the start of the data section, each one aligned.
  const offsets: number[] = [];
  let offset = 0;
  for (const t of file.tensors) {
    validateTensor(t);
    offsets.push(offset);
    sink.string(t.name);
    sink.u32(t.dims.length);
    for (const d of t.dims) sink.u64(d);
    sink.u32(GGML_TYPE_F32);
    sink.u64(offset);
    offset = alignUp(offset + t.data.byteLength, alignment);
  }

  sink.zeros(alignUp(sink.length, alignment) - sink.length);
  return { header: sink.toBuffer(), offsets };
}

/**
 * Writes `file` to `path` (truncating it). Tensor data is written tensor by tensor straight
 * from the typed arrays' memory, so peak extra memory is the header only.
 */
export async function writeGguf(path: string, file: GgufFile, onProgress?: (writtenBytes: number, totalBytes: number) => void): Promise<GgufWriteResult> {
  // Float32Array bytes are in host order; GGUF as loaded by llama.cpp here is little-endian.
  if (endianness() !== "LE") throw new Error("writeGguf: big-endian hosts are not supported");

  const alignment = file.alignment ?? GGUF_DEFAULT_ALIGNMENT;
  const declared = file.metadata["general.alignment"];
  if (declared !== undefined && !(declared.type === "u32" && declared.value === alignment)) {
    throw new Error(`general.alignment must be u32 ${alignment}`);
  }

  const { header, offsets } = buildHeader(file, alignment);
  const hash = createHash("sha256");
  const fh = await open(path, "w");
  let position = 0;

  const put = async (chunk: Uint8Array): Promise<void> => {
    hash.update(chunk);
    await fh.write(chunk, 0, chunk.length, position);
    position += chunk.length;
  };

  const last = file.tensors.length - 1;
  const totalBytes = header.length + (last >= 0 ? (offsets[last] ?? 0) + file.tensors[last]!.data.byteLength : 0);
  try {
    await put(header);
    const dataStart = position;
    for (const [i, t] of file.tensors.entries()) {
      const padding = dataStart + (offsets[i] ?? 0) - position;
      if (padding > 0) await put(new Uint8Array(padding));
      await put(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
      onProgress?.(position, totalBytes);
    }
  } finally {
    await fh.close();
  }
  return { path, bytes: position, sha256: hash.digest("hex") };
}
