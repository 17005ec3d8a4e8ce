// A llama-server that someone else runs (another box, another container), reached at a URL.
// It is never started or stopped from here: it is watched. A health check (GET /health with a
// timeout) runs every few seconds; a run of failed checks, or a failed request confirmed by an
// immediate check, counts as the server lost, and the worker's restart then waits for it to
// answer again (the fleet retries with back-off). A request never hangs on a server that has
// gone silent: connecting and each health check time out.
import type { LlamaServerEndpoint } from "./endpoint.js";
import { send } from "./http-client.js";

export interface RemoteWatch {
  /** Between health checks. Default 2 s. */
  intervalMs?: number;
  /** A health check or connect that takes longer has failed. Default 2 s. */
  timeoutMs?: number;
  /** Failed checks in a row that make the server lost. Default 2. */
  failuresToLose?: number;
  /** How long `connect` waits for the server to answer 200 on /health. Default 10 s. */
  readyTimeoutMs?: number;
}

const DEFAULTS: Required<RemoteWatch> = { intervalMs: 2000, timeoutMs: 2000, failuresToLose: 2, readyTimeoutMs: 10_000 };

export class RemoteLlamaServer implements LlamaServerEndpoint {
  readonly pid = undefined;
  readonly exited: Promise<string>;
  private lose!: (reason: string) => void;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;
  private checking = false;
  private stopped = false;

  private constructor(
    readonly baseURL: string,
    private readonly watch: Required<RemoteWatch>,
  ) {
    this.exited = new Promise((resolve) => {
      this.lose = (reason) => {
        if (this.stopped) return;
        this.stop();
        resolve(`llama-server at ${this.baseURL} lost: ${reason}`);
      };
    });
  }

  /** Resolves once the server answers 200 on /health; rejects after `readyTimeoutMs` without one. */
  static async connect(url: string, watch: RemoteWatch = {}): Promise<RemoteLlamaServer> {
    const settings = { ...DEFAULTS, ...watch };
    const server = new RemoteLlamaServer(url.replace(/\/+$/, ""), settings);
    const deadline = Date.now() + settings.readyTimeoutMs;
    let last = "";
    for (;;) {
      last = await server.probe();
      if (last === "") break;
      if (Date.now() > deadline) throw new Error(`llama-server at ${server.baseURL} did not answer /health in ${settings.readyTimeoutMs} ms: ${last}`);
      await new Promise((resolve) => setTimeout(resolve, Math.min(500, settings.intervalMs)));
    }
    server.schedule();
    return server;
  }

  kill(): void {
    this.lose("dropped by the host (fault injection)");
  }

  suspect(): void {
    if (this.stopped) return;
    this.failures++;
    void this.check();
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

  private async check(): Promise<void> {
    if (this.checking || this.stopped) return;
    this.checking = true;
    try {
      const problem = await this.probe();
      this.failures = problem === "" ? 0 : this.failures + 1;
      if (problem !== "" && this.failures >= this.watch.failuresToLose) this.lose(problem);
    } finally {
      this.checking = false;
    }
  }

  /** "" when /health answers 200 in time, else what went wrong. */
  private async probe(): Promise<string> {
    try {
      const response = await send(`${this.baseURL}/health`, "GET", undefined, undefined, this.watch.timeoutMs);
      response.body.resume();
      return response.status === 200 ? "" : `/health answered ${response.status}`;
    } catch (error) {
      return (error as Error).message;
    }
  }
}
