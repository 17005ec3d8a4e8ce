/**
 * A small SentencePiece-style ("llama" tokenizer model) vocabulary shared by every preset.
 *
 * llama.cpp's SPM tokenizer starts from single characters and repeatedly merges the adjacent
 * pair with the highest score whose concatenation is itself a token. So for a word to come out
 * as one token, every intermediate merge must also be a token: we add every prefix of every
 * word. Any substring inside a word then always merges onto a prefix, so a listed word is
 * reached whatever order the merges happen in. Scores grow with length so that longer pieces
 * win; text the vocabulary cannot express falls back to the `<0xNN>` byte tokens.
 */

/** llama_token_type / GgufMetadataTokenizerTokenType values. */
export const TokenType = {
  normal: 1,
  unknown: 2,
  control: 3,
  userDefined: 4,
  unused: 5,
  byte: 6,
} as const;

/** SentencePiece's visible space, which the "llama" tokenizer substitutes for ' '. */
export const SPACE = "\u2581";

export interface Vocab {
  readonly tokens: readonly string[];
  readonly scores: Float32Array;
  readonly types: Int32Array;
  readonly unkId: number;
  readonly bosId: number;
  /** `</s>`: the classic SPM end of sentence; the model files use `<|im_end|>` as EOS instead. */
  readonly sentenceEndId: number;
  readonly imStartId: number;
  readonly imEndId: number;
  /** Ids of every non-normal token (unknown, control, byte). */
  readonly specialIds: readonly number[];
}

// ~300 frequent English words; written with a leading space (▁) in the vocabulary.
const WORDS = `
the of and to a in is it you that he was for on are with as I his they be at one have this
from or had by not word but what some we can out other were all there when up use your how
said an each she which do their time if will way about many then them write would like so
these her long make thing see him two has look more day could go come did number sound no
most people my over know water than call first who may down side been now find any new work
part take get place made live where after back little only round man year came show every
good me give our under name very through just form sentence great think say help low line
differ turn cause much mean before move right boy old too same tell does set three want air
well also play small end put home read hand port large spell add even land here must big
high such follow act why ask men change went light kind off need house picture try us again
animal point mother world near build self earth father head stand own page should country
found answer school grow study still learn plant cover food sun four between state keep eye
never last let thought city tree cross farm hard start might story saw far sea draw left late
run while press close night real life few north open seem together next white children begin
got walk example ease paper group always music those both mark often letter until mile river
car feet care second book carry took science eat room friend began idea fish mountain stop
once base hear horse cut sure watch color face wood main enough plain girl usual young ready
above ever red list though feel talk bird soon body dog family direct pose leave song measure
door product black short numeral class wind question happen complete ship area half rock order
fire south problem piece told knew pass since top whole king space heard best hour better true
during hundred five remember step early hold west ground interest reach fast verb sing listen
six table travel less morning ten simple several vowel toward war lay against pattern slow
center love person money serve appear road map rain rule govern pull cold notice voice unit
power town fine certain fly fall lead cry dark machine note wait plan figure star box noun
field rest correct able pound done beauty drive stood contain front teach week final gave green
hello model token cache prefix server request response prompt chat assistant user system
The It This In A He She We They What How Why Hello
`;

// Pieces that usually appear glued to a previous piece, so they carry no leading ▁.
const SUFFIXES = `
s es ed ing er ers est ly ment ness tion tions able al ful less ous ive ize ism ist ity
the and ing ion ent ter re th he in er an on at en nd ti es or te of ed is it al ar st to nt
`;

function words(list: string): string[] {
  return list.split(/\s+/).filter((w) => w.length > 0);
}

function printableAscii(): string[] {
  const chars: string[] = [];
  for (let c = 0x21; c <= 0x7e; c++) chars.push(String.fromCharCode(c));
  return chars;
}

function prefixes(piece: string, minLength: number): string[] {
  const out: string[] = [];
  for (let n = minLength; n <= piece.length; n++) out.push(piece.slice(0, n));
  return out;
}

/** Normal (type 1) pieces in a fixed, deterministic order, without duplicates. */
function normalPieces(): string[] {
  const pieces = new Set<string>();
  pieces.add(SPACE);
  for (const c of printableAscii()) pieces.add(c);
  for (let c = 0x61; c <= 0x7a; c++) pieces.add(SPACE + String.fromCharCode(c));
  for (let c = 0x41; c <= 0x5a; c++) pieces.add(SPACE + String.fromCharCode(c));
  for (let d = 0; d <= 9; d++) pieces.add(SPACE + String(d));
  for (const w of words(WORDS)) for (const p of prefixes(SPACE + w, 2)) pieces.add(p);
  for (const s of words(SUFFIXES)) for (const p of prefixes(s, 1)) pieces.add(p);
  return [...pieces];
}

function byteToken(b: number): string {
  return `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`;
}

export function buildVocab(): Vocab {
  const entries: Array<{ text: string; type: number; score: number }> = [
    { text: "<unk>", type: TokenType.unknown, score: 0 },
    { text: "<s>", type: TokenType.control, score: 0 },
    { text: "</s>", type: TokenType.control, score: 0 },
  ];
  for (let b = 0; b < 256; b++) entries.push({ text: byteToken(b), type: TokenType.byte, score: 0 });
  const imStartId = entries.push({ text: "<|im_start|>", type: TokenType.control, score: 0 }) - 1;
  const imEndId = entries.push({ text: "<|im_end|>", type: TokenType.control, score: 0 }) - 1;
  for (const text of normalPieces()) {
    // Only the relative order of merge candidates matters; length is a fine proxy here.
    entries.push({ text, type: TokenType.normal, score: [...text].length });
  }

  return {
    tokens: entries.map((e) => e.text),
    scores: Float32Array.from(entries, (e) => e.score),
    types: Int32Array.from(entries, (e) => e.type),
    unkId: 0,
    bosId: 1,
    sentenceEndId: 2,
    imStartId,
    imEndId,
    specialIds: entries.flatMap((e, id) => (e.type === TokenType.normal ? [] : [id])),
  };
}
