// The live status page in a real headless Chromium (Debian's chromium package, driven by
// playwright-core): it loads with no console error, shows both workers and what their slots
// hold, updates after a request, and fits a phone's width. .ci/run installs Chromium; where
// /usr/bin/chromium is missing these tests are skipped, saying so. The JSON behind the page
// (GET /status) and its API-key rule are tested without a browser.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";

const CHROMIUM = "/usr/bin/chromium";
const ROOT = join(import.meta.dirname, "../..");

interface StatusBody {
  policy: string;
  workers: { id: string; alive: boolean; slotReports: { preview: string; tokens: number }[] | null; waitingByGroup: number[] | null }[];
  activity: { requests: number; placements: Record<string, number>; cachedFraction: number | null; ttftP50Ms: number | null }[];
}

describe("GET /status", () => {
  let server: TestServer;
  let origin: string;

  beforeAll(async () => {
    server = await startTestServer({ workers: 2, slots: 2, server: { apiKeys: ["status-key"] } });
    origin = server.baseURL.replace(/\/v1$/, "");
  });

  afterAll(async () => {
    await server?.close();
  });

  it("reports each worker's slots and queue and the last minutes of traffic, behind the API key", async () => {
    expect((await fetch(`${origin}/status`)).status).toBe(401);
    const page = await fetch(`${origin}/`);
    expect(page.status).toBe(200); // the page itself holds no data
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    const answer = await fetch(`${server.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer status-key" },
      body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "remember the quarterly report" }], max_tokens: 3 }),
    });
    expect(answer.status).toBe(200);
    const worker = answer.headers.get("x-radixgate-worker");
    const status = (await (await fetch(`${origin}/status`, { headers: { authorization: "Bearer status-key" } })).json()) as StatusBody;
    expect(status.policy).toBe("roundrobin");
    expect(status.workers.map((w) => w.id)).toEqual(["w0", "w1"]);
    const served = status.workers.find((w) => w.id === worker)!;
    expect(served.slotReports).toHaveLength(2);
    expect(served.slotReports!.some((slot) => slot.preview.includes("remember the quarterly report") && slot.tokens > 5)).toBe(true);
    expect(served.waitingByGroup).toEqual(new Array(10).fill(0));
    const last = status.activity.at(-1)!;
    expect(status.activity).toHaveLength(60);
    expect(last.requests).toBe(1);
    expect(last.placements).toEqual({ roundrobin: 1 });
    expect(last.ttftP50Ms).toBeGreaterThan(0);
  });
});

describe.skipIf(!existsSync(CHROMIUM))("the status page in Chromium", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];

  beforeAll(async () => {
    server = await startTestServer({ workers: 2, slots: 2 });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
    // A phone's viewport.
    page = await browser.newPage({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 });
    page.on("console", (message) => {
      if (message.type() === "error") problems.push(message.text());
    });
    page.on("pageerror", (error) => problems.push(error.message));
    await page.goto(`${server.baseURL.replace(/\/v1$/, "")}/`);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it("shows both workers, then the request that ran, with no console error and no sideways scrolling", async () => {
    await page.waitForSelector('section.worker[data-worker="w0"]');
    await page.waitForSelector('section.worker[data-worker="w1"]');
    const before = Number(await page.locator("#totals").getAttribute("data-requests"));
    // Two conversations, the first one twice (its second turn finds the prompt cached).
    for (const content of ["status page shows this prompt", "a second conversation about invoices", "status page shows this prompt"]) {
      await server.client.chat.completions.create(
        { model: TINY_MODEL, messages: [{ role: "user", content }], max_tokens: 3 },
        { headers: { "x-session-id": content } },
      );
    }
    await expect.poll(async () => Number(await page.locator("#totals").getAttribute("data-requests")), { timeout: 15_000 }).toBe(before + 3);
    await expect
      .poll(async () => (await page.locator("td.preview").allTextContents()).join("\n"), { timeout: 15_000 })
      .toContain("status page shows this prompt");
    expect(await page.locator("#chart-ttft circle").count()).toBeGreaterThan(0);
    expect(await page.locator("#chart-cached circle").count()).toBeGreaterThan(0);
    expect(await page.locator("#legend-requests").textContent()).toContain("roundrobin");
    // Evaluated in the page: written as a string, the test has no DOM types.
    expect(await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")).toBe(true);
    expect(problems, problems.join("\n")).toEqual([]);
    // RADIXGATE_SCREENSHOT=1 refreshes the screenshot the README shows.
    if (process.env.RADIXGATE_SCREENSHOT) await page.screenshot({ path: join(ROOT, "docs/status-page.png"), fullPage: true });
  });
});
