import { describe, expect, it } from "vitest";
import { StopSequenceFilter } from "../../src/engine/worker/stop-sequences.js";

function feed(stops: string[], chunks: string[]) {
  const filter = new StopSequenceFilter(stops);
  const sent = chunks.map((chunk) => filter.push(chunk));
  if (!filter.stopped) sent.push(filter.flush());
  return { text: sent.join(""), sent, stopped: filter.stopped };
}

describe("StopSequenceFilter", () => {
  it("passes text straight through without stop sequences", () => {
    expect(feed([], ["a", "b"])).toEqual({ text: "ab", sent: ["a", "b", ""], stopped: false });
  });

  it("cuts at a stop sequence that spans chunks, space included", () => {
    const result = feed([" User:"], ["Hello", " Us", "er: more"]);
    expect(result.text).toBe("Hello");
    expect(result.stopped).toBe(true);
  });

  it("holds back a tail that could become a stop, and releases it when it does not", () => {
    const filter = new StopSequenceFilter(["\n\n"]);
    expect(filter.push("line\n")).toBe("line");
    expect(filter.push("next")).toBe("\nnext");
    expect(filter.stopped).toBe(false);
  });

  it("stops at the earliest of several stop sequences", () => {
    expect(feed(["END", "b"], ["a b END"]).text).toBe("a ");
  });

  it("emits nothing after stopping", () => {
    const filter = new StopSequenceFilter(["x"]);
    expect(filter.push("ax")).toBe("a");
    expect(filter.push("more")).toBe("");
  });
});
