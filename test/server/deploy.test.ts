// The container and monitoring files under deploy/: no container runtime runs here, so they
// are checked as far as a machine without one can: the Dockerfiles by a Dockerfile validator
// and by what they must do (unprivileged, health-checked, the production command, sources
// that exist and pass the ignore file), the compose file's wiring, and every Grafana query
// against the metrics (and labels) a real server exports.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { validate } from "dockerfile-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";
import { fitSpillBudget } from "../../src/serving/spill-budget.js";

const ROOT = join(import.meta.dirname, "../..");
const DEPLOY = join(ROOT, "deploy");
const read = (path: string) => readFileSync(join(DEPLOY, path), "utf8");

interface Instruction {
  keyword: string;
  args: string;
}

/** The Dockerfile's instructions, continuation lines joined, comments dropped. */
function instructions(text: string): Instruction[] {
  const joined = text
    .split("\n")
    .filter((line) => !line.trimStart().startsWith("#"))
    .join("\n")
    .replace(/\\\n/g, " ");
  return joined
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const [keyword, ...rest] = line.split(/\s+/);
      return { keyword: keyword!.toUpperCase(), args: rest.join(" ") };
    });
}

describe.each(["Dockerfile", "Dockerfile.cuda"])("deploy/%s", (name) => {
  const text = read(name);
  const all = instructions(text);
  const finalStage = all.slice(all.map((instruction) => instruction.keyword).lastIndexOf("FROM"));

  it("passes the Dockerfile validator with no diagnostic", () => {
    expect(validate(text).map((diagnostic) => `${diagnostic.range.start.line + 1}: ${diagnostic.message}`)).toEqual([]);
  });

  it("runs the production command as an unprivileged user, health-checked, with pinned base images", () => {
    const user = finalStage.filter((instruction) => instruction.keyword === "USER").at(-1);
    expect(user?.args).toBeDefined();
    expect(["root", "0"]).not.toContain(user!.args.split(":")[0]);
    expect(finalStage.find((instruction) => instruction.keyword === "HEALTHCHECK")?.args).toMatch(/CMD .*\/health/);
    expect(finalStage.find((instruction) => instruction.keyword === "CMD")?.args).toBe('["node", "dist/main.js", "serve", "--config", "/app/config.yml"]');
    expect(finalStage.find((instruction) => instruction.keyword === "EXPOSE")?.args).toBe("8080");
    for (const from of all.filter((instruction) => instruction.keyword === "FROM")) expect(from.args).toMatch(/^[\w./-]+:\d[\w.-]*( AS \w+)?$/);
  });

  it("runs on jemalloc: installs Debian's libjemalloc2 in the final stage and preloads its library", () => {
    const installs = finalStage.filter((instruction) => instruction.keyword === "RUN").map((instruction) => instruction.args);
    expect(installs.some((args) => /apt-get install .*libjemalloc2/.test(args))).toBe(true);
    const env = finalStage
      .filter((instruction) => instruction.keyword === "ENV")
      .map((instruction) => instruction.args)
      .join(" ");
    expect(env).toMatch(/LD_PRELOAD=\/usr\/lib\/x86_64-linux-gnu\/libjemalloc\.so\.2(\s|$)/);
  });

  it("copies only files that exist and that its ignore file lets into the build context", () => {
    const ignore = readFileSync(join(DEPLOY, `${name}.dockerignore`), "utf8")
      .split("\n")
      .filter((line) => line.startsWith("!"))
      .map((line) => line.slice(1).replace(/\/$/, ""));
    const copies = all.filter((instruction) => instruction.keyword === "COPY" && !instruction.args.includes("--from="));
    expect(copies.length).toBeGreaterThan(3);
    for (const copy of copies) {
      const sources = copy.args
        .split(/\s+/)
        .filter((arg) => !arg.startsWith("--"))
        .slice(0, -1);
      for (const source of sources) {
        expect(existsSync(join(ROOT, source)), source).toBe(true);
        expect(ignore, `${source} is left out of the build context by ${name}.dockerignore`).toContain(source.replace(/\/$/, ""));
      }
    }
  });
});

describe("deploy/compose.yml", () => {
  const compose = parseYaml(read("compose.yml")) as {
    services: Record<string, { build?: { context: string; dockerfile: string }; volumes?: string[]; ports?: string[]; shm_size?: string }>;
  };

  it("gives the workers' state stores a /dev/shm that holds more than Docker's 64 MiB default", () => {
    const size = /^(\d+)gb$/.exec(compose.services.radixgate!.shm_size ?? "");
    expect(size).not.toBeNull();
    // Two CPU workers (workers: auto on a box without GPUs) share half of it.
    expect(fitSpillBudget(8 * 2 ** 30, 2, Number(size![1]) * 2 ** 30)).toBeGreaterThanOrEqual(2 * 2 ** 30);
  });

  it("starts Radixgate, Prometheus and Grafana, with every file it mounts or builds present", () => {
    expect(Object.keys(compose.services).sort()).toEqual(["grafana", "prometheus", "radixgate"]);
    const build = compose.services.radixgate!.build!;
    expect(existsSync(join(DEPLOY, build.context, build.dockerfile))).toBe(true);
    for (const service of Object.values(compose.services)) {
      for (const volume of service.volumes ?? []) {
        const source = volume.split(":")[0]!;
        if (source.startsWith(".")) expect(existsSync(join(DEPLOY, source)), volume).toBe(true);
      }
    }
  });

  it("has Prometheus scrape the radixgate service on the port it exposes, and Grafana read the dashboards it provisions", () => {
    const prometheus = parseYaml(read("prometheus.yml")) as { scrape_configs: { metrics_path: string; static_configs: { targets: string[] }[] }[] };
    expect(prometheus.scrape_configs[0]!.metrics_path).toBe("/metrics");
    expect(prometheus.scrape_configs[0]!.static_configs[0]!.targets).toEqual(["radixgate:8080"]);
    expect(compose.services.radixgate!.ports).toEqual(["8080:8080"]);
    const provider = parseYaml(read("grafana/provisioning/dashboards/radixgate.yml")) as { providers: { options: { path: string } }[] };
    const mounts = compose.services.grafana!.volumes!.map((volume) => volume.split(":"));
    expect(mounts).toContainEqual(["./grafana/dashboards", provider.providers[0]!.options.path, "ro"]);
    const datasource = parseYaml(read("grafana/provisioning/datasources/prometheus.yml")) as { datasources: { uid: string; url: string }[] };
    const dashboard = JSON.parse(read("grafana/dashboards/radixgate.json")) as { panels: { datasource: { uid: string } }[] };
    for (const panel of dashboard.panels) expect(panel.datasource.uid).toBe(datasource.datasources[0]!.uid);
    expect(datasource.datasources[0]!.url).toBe("http://prometheus:9090");
  });
});

describe("deploy/grafana/dashboards/radixgate.json", () => {
  let server: TestServer;
  let exposition: string;
  const dashboard = JSON.parse(read("grafana/dashboards/radixgate.json")) as { panels: { title: string; targets: { expr: string }[] }[] };

  beforeAll(async () => {
    server = await startTestServer({ workers: 2, slots: 2 });
    // One plain and one streamed request, so the latency histograms have samples.
    await server.client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: "dashboards" }], max_tokens: 4 });
    const stream = await server.client.chat.completions.create({
      model: TINY_MODEL,
      messages: [{ role: "user", content: "streamed" }],
      max_tokens: 6,
      stream: true,
    });
    for await (const _chunk of stream);
    exposition = await (await fetch(`${server.baseURL.replace(/\/v1$/, "")}/metrics`)).text();
  });

  afterAll(async () => {
    await server?.close();
  });

  it("charts what the issue asks for: TTFT and inter-token percentiles, cached fraction, placements, queues, slots, KV use, restarts", () => {
    const queries = dashboard.panels.flatMap((panel) => panel.targets.map((target) => target.expr)).join("\n");
    for (const metric of [
      "radixgate_ttft_seconds_bucket",
      "radixgate_inter_token_latency_seconds_bucket",
      "radixgate_cached_tokens_sum",
      "radixgate_placements_total",
      "radixgate_worker_queue_depth",
      "radixgate_worker_running",
      "radixgate_worker_kv_tokens",
      "radixgate_worker_restarts_total",
    ]) {
      expect(queries).toContain(metric);
    }
  });

  it("queries only metrics the server exports, grouped only by labels they carry", () => {
    const registry = server.radixgate.metrics.registry;
    for (const panel of dashboard.panels) {
      for (const { expr } of panel.targets) {
        const names = [...expr.matchAll(/radixgate_[a-z_]+/g)].map((match) => match[0]);
        expect(names.length, panel.title).toBeGreaterThan(0);
        // A histogram's series are its name with _bucket, _sum and _count.
        const baseNames = names.map((name) => (exposition.includes(`# TYPE ${name} `) ? name : name.replace(/_(bucket|sum|count)$/, "")));
        for (const base of baseNames) expect(exposition, `${panel.title}: ${base}`).toMatch(new RegExp(`^# TYPE ${base} (counter|gauge|histogram)$`, "m"));
        const bases = baseNames.map((name) => registry.getSingleMetric(name));
        for (const [, labels] of expr.matchAll(/by \(([^)]*)\)/g)) {
          for (const label of labels!.split(",").map((part) => part.trim())) {
            if (label === "le") continue;
            const carriers = bases.filter((metric) => ((metric as unknown as { labelNames?: string[] })?.labelNames ?? []).includes(label));
            expect(carriers.length, `${panel.title}: no metric in "${expr}" has the label ${label}`).toBe(bases.length);
          }
        }
      }
    }
  });
});
