// Starts a real Radixgate (real llama.cpp workers on the project's tiny model) on a free
// port, for tests that talk to it over HTTP like a user would.
import OpenAI from "openai";
import { afterAll, beforeAll } from "vitest";
import { parseConfig } from "../../src/config/load-config.js";
import { createRadixgate, type Radixgate } from "../../src/radixgate.js";

export const TINY_MODEL = "radixgate-tiny";

export interface TestServer {
  baseURL: string;
  radixgate: Radixgate;
  client: OpenAI;
  close(): Promise<void>;
}

export async function startTestServer(
  // `server`: extra keys of config.yml's server section (limits such as maxJsonDepth).
  overrides: {
    workers?: number;
    slots?: number;
    policy?: string;
    isolation?: "thread" | "process";
    /** The worker engine; llama-server runs the build `npm run build:llama-server` made. */
    engine?: "node-llama-cpp" | "llama-server";
    /** Base URLs of llama-servers elsewhere that serve the model too (one worker each, after the local ones). */
    remote?: string[];
    /** Base URLs of other Radixgate hosts that serve the model too (one worker each, after those). */
    remoteHosts?: string[];
    /** More `remote` entries as config.yml has them (after those). */
    remoteEntries?: Record<string, unknown>[];
    /** How host names of remote engines with discover: dns resolve. */
    resolveHost?: (host: string) => Promise<string[]>;
    requestTimeoutMs?: number;
    server?: Record<string, unknown>;
    /** More keys of config.yml's scheduler section. */
    scheduler?: Record<string, unknown>;
    /** Keys of config.yml's spill section. */
    spill?: Record<string, unknown>;
  } = {},
): Promise<TestServer> {
  const config = parseConfig({
    server: { host: "127.0.0.1", port: 0, logLevel: "warn", ...overrides.server },
    models: [
      {
        id: TINY_MODEL,
        source: "preset:tiny",
        workers: overrides.workers ?? 2,
        slots: overrides.slots ?? 2,
        contextSize: 2048,
        threads: 1,
        isolation: overrides.isolation ?? "thread",
        engine: overrides.engine ?? "node-llama-cpp",
        remote: [
          ...(overrides.remote ?? []).map((url) => ({ kind: "llama-server", url })),
          ...(overrides.remoteHosts ?? []).map((url) => ({ kind: "radixgate", url })),
          ...(overrides.remoteEntries ?? []),
        ],
      },
    ],
    scheduler: { policy: overrides.policy ?? "roundrobin", ...overrides.scheduler },
    ...(overrides.requestTimeoutMs !== undefined ? { generation: { requestTimeoutMs: overrides.requestTimeoutMs } } : {}),
    ...(overrides.spill ? { spill: overrides.spill } : {}),
  });
  const radixgate = await createRadixgate({ config, path: "test", dir: process.cwd() }, overrides.resolveHost ? { resolveHost: overrides.resolveHost } : {});
  const address = await radixgate.listen();
  const baseURL = `${address}/v1`;
  return {
    baseURL,
    radixgate,
    client: new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 }),
    close: () => radixgate.close(),
  };
}

/** The parts of GET /health the tests read. */
export interface Health {
  status: string;
  failovers: number;
  config_error: string | null;
  workers: {
    id: string;
    alive: boolean;
    in_flight: number;
    restarts: number;
    isolation: string;
    engine: string;
    slots: number;
    url: string | null;
    precision: string;
    circuit: string;
    circuit_reason: string | null;
    finished: { stop: number; length: number; cancelled: number };
  }[];
}

export async function healthOf(server: TestServer): Promise<Health> {
  return (await (await fetch(server.baseURL.replace(/\/v1$/, "/health"))).json()) as Health;
}

/** POST a raw body (not necessarily valid JSON) and return status and parsed JSON. */
export async function postRaw(
  baseURL: string,
  path: string,
  body: string | undefined,
  headers: Record<string, string> = { "content-type": "application/json" },
) {
  const response = await fetch(`${baseURL}${path}`, { method: "POST", headers, body });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return {
    status: response.status,
    headers: response.headers,
    json: json as { error?: { message: string; type: string; param: string | null; code: string | null } } & Record<string, unknown>,
    text,
  };
}

/** The worker engines a feature is tested on, the default first. */
export const ENGINES = ["node-llama-cpp", "llama-server"] as const;

/** Each way a worker runs: node-llama-cpp in a thread (the default) or a process, and the llama-server engine. */
export const WORKER_MODES = ["thread", "process", "llama-server"] as const;
export type WorkerMode = (typeof WORKER_MODES)[number];

/** One test server per worker mode, started before the file's tests and closed after them
 *  (the record is filled once they have started). */
export function serversInEveryMode(shape: { workers: number; slots: number }): Record<WorkerMode, TestServer> {
  const servers = {} as Record<WorkerMode, TestServer>;
  beforeAll(async () => {
    servers.thread = await startTestServer(shape);
    servers.process = await startTestServer({ ...shape, isolation: "process" });
    servers["llama-server"] = await startTestServer({ ...shape, engine: "llama-server" });
  });
  afterAll(async () => {
    for (const server of Object.values(servers)) await server?.close();
  });
  return servers;
}
