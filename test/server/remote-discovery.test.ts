// Remote engines found by name (`discover: dns`), as a Kubernetes headless service presents
// its pods: two real Radixgate hosts on two loopback addresses (127.0.0.1 and 127.0.0.2, same
// port) and a router whose one remote entry names them by a host name. The name's answer is
// the one thing the test plays (no DNS server to change here): a resolver whose addresses the
// test sets. An address that appears joins and is placed on; one that vanishes leaves the
// fleet, the scheduler, /health and the metrics; a failed resolution changes nothing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { urlAt } from "../../src/serving/discovery.js";
import { healthOf, startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

describe("urlAt", () => {
  it("puts an address in a URL's place of its host name", () => {
    expect(urlAt("http://engines.default.svc:8080", "10.1.2.3")).toBe("http://10.1.2.3:8080");
    expect(urlAt("http://engines:8080/base", "10.1.2.3")).toBe("http://10.1.2.3:8080/base");
    expect(urlAt("https://engines/", "fd00::5")).toBe("https://[fd00::5]/");
  });
});

describe("remote engines discovered by name", () => {
  const hosts: TestServer[] = [];
  let router: TestServer;
  let answer: string[] | Error = ["127.0.0.1"];
  let port = 0;

  beforeAll(async () => {
    hosts.push(await startTestServer({ workers: 1 }));
    port = Number(new URL(hosts[0]!.baseURL).port);
    // The second host on the same port, another loopback address: a second pod behind the name.
    hosts.push(await startTestServer({ workers: 1, server: { host: "127.0.0.2", port } }));
    router = await startTestServer({
      workers: 0,
      remoteEntries: [{ kind: "radixgate", url: `http://engines.test:${port}`, discover: "dns", discoverEveryS: 3600 }],
      resolveHost: async (host) => {
        expect(host).toBe("engines.test");
        if (answer instanceof Error) throw answer;
        return answer;
      },
      policy: "preble",
    });
  });

  afterAll(async () => {
    await router?.close();
    await Promise.allSettled(hosts.map((host) => host.close()));
  });

  const workers = async () => (await healthOf(router)).workers.map((worker) => [worker.id, worker.url, worker.alive]);

  it("starts with one worker per address the name has", async () => {
    expect(await workers()).toEqual([["w0", `http://127.0.0.1:${port}`, true]]);
  });

  it("takes in an address that appears, and places on it once it answered", async () => {
    answer = ["127.0.0.1", "127.0.0.2"];
    await router.radixgate.discovery.refresh();
    const joined = await until(workers, (list) => list.length === 2 && list.every(([, , alive]) => alive), 800);
    expect(joined).toEqual([
      ["w0", `http://127.0.0.1:${port}`, true],
      ["w1", `http://127.0.0.2:${port}`, true],
    ]);
    const response = await fetch(`${router.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-radixgate-worker": "w1" },
      body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "Hello, second pod" }], max_tokens: 4 }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-radixgate-worker")).toBe("w1");
    const metrics = await (await fetch(router.baseURL.replace(/\/v1$/, "/metrics"))).text();
    for (const id of ["w0", "w1"]) expect(metrics).toMatch(new RegExp(`radixgate_worker_alive\\{worker="${id}"`));
  });

  it("keeps what it has when the name does not resolve", async () => {
    answer = new Error("SERVFAIL");
    await router.radixgate.discovery.refresh();
    expect((await workers()).map(([id]) => id)).toEqual(["w0", "w1"]);
  });

  it("lets an address that vanished go: fleet, scheduler, /health and metrics", async () => {
    answer = ["127.0.0.2"];
    await router.radixgate.discovery.refresh();
    expect(await workers()).toEqual([["w1", `http://127.0.0.2:${port}`, true]]);
    expect(router.radixgate.scheduler.views().map((view) => view.id)).toEqual(["w1"]);
    const metrics = await (await fetch(router.baseURL.replace(/\/v1$/, "/metrics"))).text();
    expect(metrics).toMatch(/radixgate_worker_alive\{worker="w1"/);
    expect(metrics).not.toMatch(/worker="w0"/);
    // Requests go to what is left; the id of the one that left is not reused.
    const served = await fetch(`${router.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "Who is left?" }], max_tokens: 4 }),
    });
    expect(served.headers.get("x-radixgate-worker")).toBe("w1");
    answer = ["127.0.0.1", "127.0.0.2"];
    await router.radixgate.discovery.refresh();
    expect((await workers()).map(([id]) => id)).toEqual(["w1", "w2"]);
  });
});
