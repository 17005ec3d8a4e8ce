// An engine server that someone else runs (another box, another container), reached at a URL:
// a llama-server, or another Radixgate host.
// It is never started or stopped from here: it is watched. A health check (GET /health with a
// timeout) runs every few seconds; a run of failed checks, or a failed request confirmed by an
// immediate check, counts as the server lost, and the worker's restart then waits for it to
// answer again (the fleet retries with back-off). A request never hangs on a server that has
// gone silent: connecting and each health check time out.
import type { EngineEndpoint } from "./endpoint.js";
import { type HealthProbe, healthProblem, untilHealthy } from "./http-client.js";

export interface RemoteWatch {
  /** Between health checks. Default 2 s. */
  intervalMs?: number;
  /** A health check or connect that takes longer has failed. Default 2 s. */
  timeoutMs?: number;
  /** Failed checks in a row that make the server lost. Default 2. */
  failuresToLose?: number;
  /** How long `connect` waits for the server to answer 200 on /health. Default 10 s. */
  readyTimeoutMs?: number;
  /** What is asked: GET /health by default; an OpenAI server's /v1/models, with its key. */
  probe?: HealthProbe;
}

const DEFAULTS: Required<RemoteWatch> = { intervalMs: 2000, timeoutMs: 2000, failuresToLose: 2, readyTimeoutMs: 10_000, probe: { path: "/health" } };

export class RemoteHost implements EngineEndpoint {
  readonly pid = undefined;
  readonly exited: Promise<string>;
  private lose!: (reason: string) => void;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;
  /** The health check under way, which a second caller waits for instead of starting another. */
  private checking: Promise<void> | undefined;
  private lost = false;
  private stopped = false;

  private constructor(
    readonly baseURL: string,
    private readonly watch: Required<RemoteWatch>,
    /** What runs there, for messages: "llama-server", "Radixgate host". */
    label: string,
  ) {
    this.exited = new Promise((resolve) => {
      this.lose = (reason) => {
        if (this.stopped) return;
        this.lost = true;
        this.stop();
        resolve(`${label} at ${this.baseURL} lost: ${reason}`);
      };
    });
  }

  /** Resolves once the server answers 200 on /health; rejects after `readyTimeoutMs` without one. */
  static async connect(url: string, watch: RemoteWatch = {}, label = "llama-server"): Promise<RemoteHost> {
    const settings = { ...DEFAULTS, ...watch };
    const server = new RemoteHost(url.replace(/\/+$/, ""), settings, label);
    await untilHealthy(server.baseURL, { readyTimeoutMs: settings.readyTimeoutMs, pollMs: Math.min(500, settings.intervalMs), probe: settings.probe });
    server.schedule();
    return server;
  }

  kill(): void {
    this.lose("dropped by the host (fault injection)");
  }

  /** The failed request counts as one failed check; one more, made now, makes it lost. */
  async confirmLost(): Promise<boolean> {
    if (!this.stopped) {
      this.failures++;
      await this.check();
    }
    return this.lost;
  }

  async close(): Promise<void> {
    this.stop();
  }

  private stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.check().then(() => this.schedule()), this.watch.intervalMs);
    this.timer.unref();
  }

  private check(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.checking ??= healthProblem(this.baseURL, this.watch.timeoutMs, this.watch.probe)
      .then((problem) => {
        this.failures = problem === "" ? 0 : this.failures + 1;
        if (problem !== "" && this.failures >= this.watch.failuresToLose) this.lose(problem);
      })
      .finally(() => (this.checking = undefined));
    return this.checking;
  }
}
