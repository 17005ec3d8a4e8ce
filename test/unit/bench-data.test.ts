// The traces and transcripts the benchmarks replay live in bench/data, copied unchanged from
// their sources (bench/data/PROVENANCE.md): each file still has the SHA-256 recorded there.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const DATA = fileURLToPath(new URL("../../bench/data/", import.meta.url));

/** `<sha256>  ./<path>` lines; the list's own line is skipped (a file cannot hold its own sum). */
function recordedSums(): { sum: string; path: string }[] {
  return readFileSync(`${DATA}SHA256SUMS`, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const [sum, path] = line.split(/\s+/, 2) as [string, string];
      return { sum, path: path.replace(/^\.\//, "") };
    })
    .filter(({ path }) => path !== "SHA256SUMS");
}

describe("bench/data", () => {
  it("holds every recorded file, byte for byte", () => {
    const sums = recordedSums();
    expect(sums.length).toBeGreaterThan(40);
    const mismatched = sums.filter(
      ({ sum, path }) =>
        createHash("sha256")
          .update(readFileSync(`${DATA}${path}`))
          .digest("hex") !== sum,
    );
    expect(mismatched).toEqual([]);
  });

  it("names each source's licence", () => {
    const provenance = readFileSync(`${DATA}PROVENANCE.md`, "utf8");
    for (const licence of ["CC-BY 4.0", "Apache-2.0", "MIT"]) expect(provenance).toContain(licence);
  });
});
