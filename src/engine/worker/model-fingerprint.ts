// The identity of a model file, cheap enough for a 40 GB GGUF: its size plus a SHA-256 over
// its first MiB (the header: architecture, shapes, vocabulary) and 32 chunks of 64 KiB spread
// evenly over the rest (the weights). Two files with the same shapes but other weights, which
// node-llama-cpp would happily load each other's KV state from, differ here.
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";

const HEAD_BYTES = 1 << 20;
const CHUNK_BYTES = 64 << 10;
const CHUNKS = 32;

export async function modelFingerprint(path: string): Promise<string> {
  const file = await open(path, "r");
  try {
    const { size } = await file.stat();
    const hash = createHash("sha256");
    const read = async (position: number, length: number) => {
      const buffer = Buffer.alloc(Math.max(0, Math.min(length, size - position)));
      if (buffer.length > 0) await file.read(buffer, 0, buffer.length, position);
      hash.update(buffer);
    };
    await read(0, HEAD_BYTES);
    for (let i = 0; i < CHUNKS; i++) await read(Math.floor(((size - CHUNK_BYTES) * i) / (CHUNKS - 1)), CHUNK_BYTES);
    return `${size}:${hash.digest("hex").slice(0, 32)}`;
  } finally {
    await file.close();
  }
}
