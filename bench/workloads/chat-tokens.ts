// A deterministic stand-in tokenizer for replaying real chat transcripts as token ids, with
// no model and no vocabulary file. What it must preserve is the one property the scheduler
// sees: equal text gives equal ids, so a conversation that re-sends its history re-sends
// exactly the same token prefix, and different text gives different ids.
//
// The rule (documented so that others can reproduce a run):
//   1. Text is cut into pieces with GPT-2's pre-tokenisation regex (contractions, a run of
//      letters with one optional leading space, a run of digits likewise, a run of other
//      symbols likewise, whitespace runs).
//   2. A piece longer than 8 characters is cut into chunks of 4 (BPE splits rare long words
//      into subwords); on English prose and JSON this gives about 4 characters per token,
//      close to a real BPE vocabulary (test/unit/workloads.test.ts checks 2.5-6).
//   3. Each piece becomes id = mix32(seed, salt, PIECE, fnv1a(piece)) mod vocab. The salt is
//      per run: two runs share no token id sequence, not even the first token.
// Chat messages are rendered ChatML-style, each message on its own: `<|im_start|>` + role +
// newline, the content, `<|im_end|>` + newline, markers hashed like any other piece. A prompt
// is its messages' renderings in order followed by the generation header
// `<|im_start|>assistant\n`, which is also how the answer starts when the next call re-sends
// it: so call k's prompt is an exact token prefix of call k+1's whenever call k+1 re-sends
// call k's messages and answer unchanged.
import { mix32, VOCAB } from "./tokens.js";

/** GPT-2's pre-tokenisation pattern (openai/gpt-2 encoder.py), with Unicode classes. */
const PIECES = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
const LONG_PIECE = 8;
const CHUNK = 4;
const PIECE = 0x8001;

export interface ChatMessage {
  role: string;
  content: string;
}

/** 32-bit FNV-1a over UTF-16 code units. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export class StandInTokenizer {
  private readonly ids = new Map<string, number>();

  constructor(
    readonly seed: number,
    readonly salt: number,
    readonly vocab: number = VOCAB,
  ) {}

  /** The pieces of `text` (before hashing): what one token stands for. */
  static pieces(text: string): string[] {
    const out: string[] = [];
    for (const match of text.matchAll(PIECES)) {
      const piece = match[0];
      if (piece.length <= LONG_PIECE) out.push(piece);
      else for (let i = 0; i < piece.length; i += CHUNK) out.push(piece.slice(i, i + CHUNK));
    }
    return out;
  }

  private id(piece: string): number {
    let id = this.ids.get(piece);
    if (id === undefined) {
      id = mix32(this.seed, this.salt, PIECE, fnv1a(piece)) % this.vocab;
      this.ids.set(piece, id);
    }
    return id;
  }

  /** Appends the ids of `text` to `out` (and returns it). */
  encode(text: string, out: number[] = []): number[] {
    for (const piece of StandInTokenizer.pieces(text)) out.push(this.id(piece));
    return out;
  }

  /** `<|im_start|>role\n`: a message's header, and the generation prompt with role "assistant". */
  header(role: string, out: number[] = []): number[] {
    out.push(this.id("<|im_start|>"));
    return this.encode(`${role}\n`, out);
  }

  /** One message as the chat template renders it. */
  message(message: ChatMessage, out: number[] = []): number[] {
    this.header(message.role, out);
    return this.answer(message.content, out);
  }

  /** What follows the header of a message: its content and `<|im_end|>\n`. */
  answer(content: string, out: number[] = []): number[] {
    this.encode(content, out);
    out.push(this.id("<|im_end|>"));
    return this.encode("\n", out);
  }

  /** A prompt: the messages, then the generation header. */
  prompt(messages: readonly ChatMessage[]): number[] {
    const out: number[] = [];
    for (const message of messages) this.message(message, out);
    return this.header("assistant", out);
  }
}
