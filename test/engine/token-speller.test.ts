// Tokens handed back several at a time are spelled as one at a time would be: a character
// split over byte tokens is held back until it is whole, and each release is spelled after
// the tokens released before it (real tokenizer: the tiny model's, which spells "€" as three
// byte tokens).
import type { Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { TokenSpeller } from "../../src/engine/worker/token-speller.js";
import { useLoadedModel, useTinyModel } from "../helpers/tiny-worker.js";

const tiny = useTinyModel();

describe("TokenSpeller", () => {
  const loaded = useLoadedModel(tiny.path);

  const text = "price: €5 and ü in 日本 today";

  it("holds a character's first bytes back until its last one comes, and spells the whole text", () => {
    const model = loaded();
    const tokens = model.tokenize(text) as Token[];
    // The test needs a character split over tokens that are not whole characters alone.
    expect(tokens.some((token) => model.detokenize([token]).endsWith("\uFFFD"))).toBe(true);
    const speller = new TokenSpeller(model, new Set());
    const released: string[] = [];
    for (const token of tokens) {
      const { tokens: out, text: spelled } = speller.push([token]);
      expect(spelled.includes("\uFFFD")).toBe(false);
      if (out.length > 0) released.push(spelled);
    }
    released.push(speller.flush().text);
    expect(released.join("")).toBe(model.detokenize(tokens));
    // The byte tokens of "€" came out together, after the last of them.
    expect(released.some((piece) => piece.includes("€"))).toBe(true);
  });

  it("spells the same text whichever way the tokens are grouped", () => {
    const model = loaded();
    const tokens = model.tokenize(text) as Token[];
    for (const size of [1, 2, 3, 5, tokens.length]) {
      const speller = new TokenSpeller(model, new Set());
      let spelled = "";
      let count = 0;
      for (let at = 0; at < tokens.length; at += size) {
        const released = speller.push(tokens.slice(at, at + size));
        spelled += released.text;
        count += released.tokens.length;
      }
      const rest = speller.flush();
      spelled += rest.text;
      count += rest.tokens.length;
      expect(spelled, `groups of ${size}`).toBe(model.detokenize(tokens));
      expect(count).toBe(tokens.length);
    }
  });

  it("ends on the vocabulary's end-of-generation tokens and the extra ones it is given", () => {
    const model = loaded();
    const speller = new TokenSpeller(model, new Set([42]));
    expect(speller.ends(model.tokens.eos!)).toBe(true);
    expect(speller.ends(42 as Token)).toBe(true);
    expect(speller.ends(model.tokenize("hello")[0]!)).toBe(false);
  });
});
