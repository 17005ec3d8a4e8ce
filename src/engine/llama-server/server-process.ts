// One llama-server process: started on a free loopback port, ready once /health answers 200,
// watched for its exit. Used by the `llama-server` engine (one process per worker, pinned to
// its GPU by the environment) and by bench:peer (the peer Radixgate is measured against).
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import type { EngineEndpoint } from "../remote/endpoint.js";
import { untilHealthy } from "../remote/http-client.js";

/**
 * util-linux's setpriv sets the parent-death signal and then runs the server in its own place
 * (same pid): a host that is killed outright (SIGKILL, OOM) takes its llama-server processes
 * with it instead of leaving them holding the GPU. Linux only; elsewhere they are started bare.
 */
const SETPRIV = "/usr/bin/setpriv";

export interface LlamaServerLaunch {
  binary: string;
  args: string[];
  /** Extra environment, e.g. CUDA_VISIBLE_DEVICES=1 to pin it to one GPU. */
  env?: Record<string, string>;
  /** The port of 127.0.0.1 to listen on; default: a free one. */
  port?: number;
  /** How long loading the model may take before the start counts as failed. Default 120 s. */
  readyTimeoutMs?: number;
}

/** What the settings of one worker give as llama-server's command line. */
export interface LlamaServerSettings {
  modelPath: string;
  slots: number;
  /** Tokens per slot: the server gets slots x this in all, split evenly (no unified KV). */
  contextPerSlot: number;
  batchSize: number;
  threads: number;
  /** `--poll`: how hard its compute threads spin for the next graph (0-100). Absent: llama-server's default. */
  threadPoll?: number;
  flashAttention?: boolean | "auto";
  /** Offload every layer to the GPU (false: CPU only). */
  gpu: boolean;
}

export function llamaServerArgs(settings: LlamaServerSettings): string[] {
  const flash = settings.flashAttention === true ? "on" : settings.flashAttention === false ? "off" : "auto";
  return [
    ["-m", settings.modelPath],
    ["-np", String(settings.slots)],
    ["-c", String(settings.slots * settings.contextPerSlot)],
    ["-b", String(settings.batchSize)],
    ["-t", String(settings.threads)],
    ["-tb", String(settings.threads)],
    settings.threadPoll === undefined ? [] : ["--poll", String(settings.threadPoll)],
    ["-fa", flash],
    ["-ngl", settings.gpu ? "999" : "0"],
    ["--no-webui"],
  ].flat();
}

export class LlamaServerProcess implements EngineEndpoint {
  /** Resolves with a description of how it ended (exit code or signal), whoever ended it. */
  readonly exited: Promise<string>;
  private stderrTail = "";

  private constructor(
    private readonly child: ChildProcess,
    readonly baseURL: string,
  ) {
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => resolve(signal ? `llama-server killed by ${signal}` : `llama-server exited with code ${code}`));
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString()).slice(-4000);
    });
  }

  /** Starts the process on a free port of 127.0.0.1 and waits until it serves. */
  static async start(launch: LlamaServerLaunch): Promise<LlamaServerProcess> {
    const port = launch.port ?? (await freePort());
    const command = [launch.binary, ...launch.args, "--host", "127.0.0.1", "--port", String(port)];
    const guarded = process.platform === "linux" && existsSync(SETPRIV) ? [SETPRIV, "--pdeathsig", "SIGKILL", "--", ...command] : command;
    const child = spawn(guarded[0]!, guarded.slice(1), {
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, ...launch.env },
    });
    const server = new LlamaServerProcess(child, `http://127.0.0.1:${port}`);
    let spawnError: Error | undefined;
    child.once("error", (error) => (spawnError = error));
    try {
      await untilHealthy(server.baseURL, {
        readyTimeoutMs: launch.readyTimeoutMs ?? 120_000,
        pollMs: 100,
        gaveUp: async () => {
          if (spawnError) return `llama-server ${launch.binary} did not start: ${spawnError.message}`;
          if (child.exitCode !== null || child.signalCode !== null) return `${await server.exited} before serving`;
          return undefined;
        },
      });
    } catch (error) {
      child.kill("SIGKILL");
      throw new Error(`${(error as Error).message}: ${server.stderr}`);
    }
    return server;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The last 4 kB it wrote to stderr (its log). */
  get stderr(): string {
    return this.stderrTail;
  }

  /** Fault injection: the process dies at once, as on a crash. */
  kill(): void {
    this.child.kill("SIGKILL");
  }

  /** Its exit is watched directly; a dropped connection may come a moment before the exit is reported. */
  confirmLost(): Promise<boolean> {
    return Promise.race([this.exited.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 500))]);
  }

  /** SIGTERM, then SIGKILL if it has not exited after `graceMs`. */
  async close(graceMs = 10_000): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** A port of 127.0.0.1 that nothing listens on now (the OS picks it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no free port"))));
    });
  });
}
