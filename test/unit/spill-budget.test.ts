// Each worker's state store budget: spill.budgetBytes, at most an even share of half the
// state folder's filesystem among the host's workers (a tmpfs holds only what it was sized for).
import { statfsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fitSpill, fitSpillBudget, folderBytes, spillBudgetNotice } from "../../src/serving/spill-budget.js";

const GiB = 2 ** 30;
const MiB = 2 ** 20;
const spill = (budgetBytes: number, dir = "/states") => ({ budgetBytes, minTokens: 64, recentMs: 600_000, dir });

describe("fitSpillBudget", () => {
  it("keeps the configured budget where the folder holds it for every worker", () => {
    // 8 GiB each for 8 workers: 64 GiB of 256 GiB (half a 512 GiB host's RAM, /dev/shm's default).
    expect(fitSpillBudget(8 * GiB, 8, 256 * GiB)).toBe(8 * GiB);
  });

  it("lowers it to an even share of half the folder otherwise", () => {
    // A 24 GiB machine's /dev/shm (12 GiB), two workers: 3 GiB each.
    expect(fitSpillBudget(8 * GiB, 2, 12 * GiB)).toBe(3 * GiB);
    // A container's default 64 MiB /dev/shm, one worker: 32 MiB.
    expect(fitSpillBudget(8 * GiB, 1, 64 * MiB)).toBe(32 * MiB);
  });

  it("leaves a store that is off off, and a folder it cannot read to the configured budget", () => {
    expect(fitSpillBudget(0, 2, 64 * MiB)).toBe(0);
    expect(fitSpillBudget(8 * GiB, 2, undefined)).toBe(8 * GiB);
  });
});

describe("folderBytes", () => {
  it("is the size of the filesystem the folder is on, or will be on once made", () => {
    const stats = statfsSync(tmpdir());
    expect(folderBytes(tmpdir())).toBe(stats.blocks * stats.bsize);
    expect(folderBytes(join(tmpdir(), "radixgate-not-made-yet", "w0"))).toBe(stats.blocks * stats.bsize);
  });
});

describe("fitSpill", () => {
  it("says what lowered the budget, and gives every worker the lowered one", () => {
    const fitted = fitSpill(spill(8 * GiB), 4, (dir) => (dir === "/states" ? 16 * GiB : undefined));
    expect(fitted.spill).toEqual(spill(2 * GiB));
    expect(fitted.configuredBytes).toBe(8 * GiB);
    expect(fitted.lowered).toEqual({ dir: "/states", folderBytes: 16 * GiB, workers: 4 });
  });

  it("says nothing when the folder holds the configured budget, and reads no folder for a store that is off", () => {
    expect(fitSpill(spill(GiB), 2, () => 16 * GiB)).toEqual({ spill: spill(GiB), configuredBytes: GiB });
    const read: string[] = [];
    const sizeOf = (dir: string) => {
      read.push(dir);
      return 1;
    };
    expect(fitSpill(spill(0), 2, sizeOf).spill.budgetBytes).toBe(0);
    expect(read).toEqual([]);
  });
});

describe("spillBudgetNotice", () => {
  it("says nothing when the configured budget stands", () => {
    expect(spillBudgetNotice(fitSpill(spill(GiB), 2, () => 16 * GiB))).toBeUndefined();
  });

  it("informs where the folder is half a host's RAM, and warns where it leaves the store little (a container's 64 MiB)", () => {
    const host = spillBudgetNotice(fitSpill(spill(8 * GiB), 2, () => 12 * GiB))!;
    expect(host.level).toBe("info");
    expect(host.fields).toMatchObject({ configuredMiB: 8192, perWorkerMiB: 3072, folderMiB: 12288, workers: 2 });
    const container = spillBudgetNotice(fitSpill(spill(8 * GiB), 2, () => 64 * MiB))!;
    expect(container.level).toBe("warn");
    expect(container.fields).toMatchObject({ perWorkerMiB: 16 });
    expect(container.message).toMatch(/shm_size/);
  });
});
