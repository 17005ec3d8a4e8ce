// How the host reaches a worker: a piscina thread (`thread` isolation) or a child process
// (`process` isolation). Both run the same worker/slot-engine.ts and take the same tasks; a
// generation gets a two-way channel for its events and its cancel message.
import { fork, type ChildProcess } from "node:child_process";
import { MessageChannel } from "node:worker_threads";
import { Piscina } from "piscina";
import type { ChildToHost, HostToChild } from "../wire/process-protocol.js";
import type { GenerateTask, GenerationControl, GenerationEvent, WorkerInit, WorkerTask } from "../wire/protocol.js";
import { processEntry, threadEntry } from "./entry.js";

export class WorkerDiedError extends Error {
  override name = "WorkerDiedError";
}

export interface GenerationChannel {
  result: Promise<unknown>;
  control(message: GenerationControl): void;
  /** Settles once every event sent before the task ended has been delivered. */
  close(): void;
}

export interface WorkerRunner {
  run(task: Exclude<WorkerTask, GenerateTask>): Promise<unknown>;
  generate(task: Omit<GenerateTask, "port">, onEvent: (event: GenerationEvent) => void): GenerationChannel;
  /** Resolves when the worker stops on its own (crash, kill), never on close(). */
  readonly died: Promise<string>;
  /** The OS process id in process isolation. */
  readonly pid: number | undefined;
  /** Stops the worker; call after a dispose task, with no generation running. */
  close(): Promise<void>;
}

/** A piscina pool of exactly one thread that holds the model. */
export class ThreadRunner implements WorkerRunner {
  private readonly pool: Piscina;
  readonly died: Promise<string>;
  readonly pid = undefined;

  constructor(init: WorkerInit) {
    const entry = threadEntry(import.meta.url, "../worker/thread-main");
    this.pool = new Piscina({
      filename: entry.filename,
      argv: entry.argv,
      workerData: init,
      minThreads: 1,
      maxThreads: 1,
      // The thread holds the loaded model: it must never be reaped for idleness.
      idleTimeout: Number.POSITIVE_INFINITY,
      // Every request reaches the thread at once; its local scheduler queues them.
      concurrentTasksPerWorker: 1024,
    });
    // A thread that dies takes its model with it; piscina would start a bare one.
    this.died = new Promise((resolve) => this.pool.once("error", (error: Error) => resolve(`thread crashed: ${error.message}`)));
  }

  run(task: Exclude<WorkerTask, GenerateTask>): Promise<unknown> {
    return this.pool.run(task);
  }

  generate(task: Omit<GenerateTask, "port">, onEvent: (event: GenerationEvent) => void): GenerationChannel {
    const { port1: host, port2: worker } = new MessageChannel();
    host.on("message", onEvent);
    const result = this.pool.run({ ...task, port: worker } satisfies GenerateTask, { transferList: [worker] });
    return { result, control: (message) => host.postMessage(message), close: () => host.close() };
  }

  close(): Promise<void> {
    return this.pool.destroy();
  }
}

/** A child Node process per worker: a native abort there ends this worker, not the host. */
export class ProcessRunner implements WorkerRunner {
  private readonly child: ChildProcess;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  private readonly ports = new Map<number, (event: GenerationEvent) => void>();
  private closing = false;
  readonly died: Promise<string>;

  constructor(init: WorkerInit, env: Record<string, string>) {
    const entry = processEntry(import.meta.url, "../worker/process-main");
    this.child = fork(entry.filename, [], {
      env: { ...process.env, ...env },
      execArgv: entry.execArgv,
      serialization: "advanced",
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.child.on("message", (message: ChildToHost) => this.receive(message));
    this.died = new Promise((resolve) => {
      this.child.once("exit", (code, signal) => {
        const reason = signal ? `worker process killed by ${signal}` : `worker process exited with code ${code}`;
        for (const { reject } of this.pending.values()) reject(new WorkerDiedError(reason));
        this.pending.clear();
        if (!this.closing) resolve(reason);
      });
    });
    this.send({ type: "init", init });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  run(task: Exclude<WorkerTask, GenerateTask>): Promise<unknown> {
    return this.request(task);
  }

  generate(task: Omit<GenerateTask, "port">, onEvent: (event: GenerationEvent) => void): GenerationChannel {
    const portId = this.nextId++;
    this.ports.set(portId, onEvent);
    const result = this.request(task, portId);
    return {
      result,
      control: (message) => this.send({ type: "port", portId, message }),
      close: () => this.ports.delete(portId),
    };
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    this.child.disconnect();
    await exited;
  }

  private request(task: unknown, portId?: number): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (!this.child.connected) {
        reject(new WorkerDiedError("worker process is not running"));
        return;
      }
      this.pending.set(id, { resolve, reject });
      this.send({ type: "task", id, task, ...(portId !== undefined ? { portId } : {}) });
    });
  }

  private receive(message: ChildToHost): void {
    if (message.type === "port") {
      this.ports.get(message.portId)?.(message.message);
      return;
    }
    const waiter = this.pending.get(message.id);
    if (!waiter) return;
    this.pending.delete(message.id);
    if (message.type === "result") waiter.resolve(message.value);
    else waiter.reject(new Error(message.message));
  }

  private send(message: HostToChild): void {
    if (this.child.connected) this.child.send(message);
  }
}
