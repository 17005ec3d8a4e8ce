// How the host reaches a worker: a piscina thread (`thread` isolation) or a child process
// (`process` isolation). Both run the same worker/slot-engine.ts and take the same tasks; a
// generation gets a two-way channel for its events and its cancel message.
import { fork, type ChildProcess } from "node:child_process";
import { MessageChannel } from "node:worker_threads";
import { Piscina } from "piscina";
import type { ChildToHost, HostToChild } from "../wire/process-protocol.js";
import type { GenerateTask, GenerationControl, GenerationEvent, WorkerInit, WorkerTask } from "../wire/protocol.js";
import type { TaskOutcome } from "../wire/task-outcome.js";
import { processEntry, threadEntry } from "./entry.js";
import { workerEnvironment } from "./tested-bindings.js";
import { taskValue, WorkerDiedError } from "./worker-errors.js";

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

/** How long closing a dead thread waits for it to exit: a little past the thread's own stop timeout (worker/task-handler.ts). */
const DYING_THREAD_EXIT_MS = 35_000;

/**
 * A piscina pool of exactly one thread that holds the model. The thread dies through its
 * fatal path (worker/task-handler.ts): its tasks fail as `worker_died`, then it exits. The
 * first sign of either marks the runner dead; it takes no task after that (piscina would
 * start a bare thread in its place, which must never see one: the host starts a new runner).
 */
export class ThreadRunner implements WorkerRunner {
  private readonly pool: Piscina;
  readonly died: Promise<string>;
  readonly pid = undefined;
  private deathReason: string | undefined;
  private closing = false;
  private markDead!: (reason: string) => void;
  /** Resolves when the model's thread has ended. */
  private readonly threadEnded: Promise<void>;
  /** The thread's attention word (WorkerInit.attention): raised after each message posted to it. */
  private readonly attention = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));

  constructor(init: WorkerInit) {
    this.pool = new Piscina({
      ...threadEntry(import.meta.url, "../worker/thread-main", { ...init, attention: this.attention }),
      minThreads: 1,
      maxThreads: 1,
      // The thread holds the loaded model: it must never be reaped for idleness.
      idleTimeout: Number.POSITIVE_INFINITY,
      // Every request reaches the thread at once; its local scheduler queues them.
      concurrentTasksPerWorker: 1024,
      // With atomics, an idle piscina thread blocks in Atomics.wait and its event loop stops
      // until the next task: a dying thread that had failed its tasks never got to free
      // llama.cpp (measured). The thread's own work between tasks must keep running.
      atomics: "disabled",
    });
    this.died = new Promise((resolve) => {
      this.markDead = (reason) => {
        if (this.deathReason !== undefined || this.closing) return;
        this.deathReason = reason;
        resolve(reason);
      };
    });
    let markEnded!: () => void;
    this.threadEnded = new Promise((resolve) => (markEnded = resolve));
    // The thread ended: after its fatal path, or any other way (an 'error' with no task running).
    this.pool.on("workerDestroy", () => {
      markEnded();
      this.markDead("worker thread exited");
    });
    this.pool.on("error", (error: Error) => this.markDead(`thread crashed: ${error.message}`));
  }

  run(task: Exclude<WorkerTask, GenerateTask>): Promise<unknown> {
    if (this.deathReason !== undefined) return Promise.reject(new WorkerDiedError(this.deathReason));
    return this.settle(this.posted(this.pool.run(task)));
  }

  generate(task: Omit<GenerateTask, "port">, onEvent: (event: GenerationEvent) => void): GenerationChannel {
    const { port1: host, port2: worker } = new MessageChannel();
    host.on("message", onEvent);
    const result =
      this.deathReason !== undefined
        ? Promise.reject(new WorkerDiedError(this.deathReason))
        : this.settle(this.posted(this.pool.run({ ...task, port: worker } satisfies GenerateTask, { transferList: [worker] })));
    return { result, control: (message) => this.posted(host.postMessage(message)), close: () => host.close() };
  }

  /**
   * Raises the attention word once a message is posted (piscina posts a task within run()
   * while the thread has room for it, as it always has here): a long call of the thread's
   * generation loop ends at its next step, and the thread reads the message.
   */
  private posted<T>(value: T): T {
    Atomics.store(this.attention, 0, 1);
    return value;
  }

  async close(): Promise<void> {
    this.closing = true;
    // A thread on its fatal path is still freeing llama.cpp: ending it before it exits on
    // its own aborts the whole host process.
    if (this.deathReason !== undefined) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.threadEnded, new Promise<void>((resolve) => (timer = setTimeout(resolve, DYING_THREAD_EXIT_MS)))]);
      clearTimeout(timer);
    }
    await this.pool.destroy();
  }

  /** A task's value or typed error; a death it reports marks the runner dead. */
  private async settle(task: Promise<TaskOutcome>): Promise<unknown> {
    try {
      return taskValue(await task);
    } catch (error) {
      if (error instanceof WorkerDiedError) this.markDead(error.message);
      // piscina failed the task itself: once the thread is dead, that is the death.
      else if (this.deathReason !== undefined) throw new WorkerDiedError(this.deathReason);
      throw error;
    }
  }
}

/** A child Node process per worker: a native abort there ends this worker, not the host. */
export class ProcessRunner implements WorkerRunner {
  private readonly child: ChildProcess;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (outcome: TaskOutcome) => void; reject: (error: Error) => void }>();
  private readonly ports = new Map<number, (event: GenerationEvent) => void>();
  private closing = false;
  readonly died: Promise<string>;

  constructor(init: WorkerInit, env: Record<string, string>) {
    const entry = processEntry(import.meta.url, "../worker/process-main");
    this.child = fork(entry.filename, [], {
      env: workerEnvironment(env),
      execArgv: entry.execArgv,
      serialization: "advanced",
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.child.on("message", (message: ChildToHost) => this.receive(message));
    this.died = new Promise((resolve) => {
      const die = (reason: string) => {
        for (const { reject } of this.pending.values()) reject(new WorkerDiedError(reason));
        this.pending.clear();
        if (!this.closing) resolve(reason);
      };
      this.child.once("exit", (code, signal) => die(signal ? `worker process killed by ${signal}` : `worker process exited with code ${code}`));
      // A process that never started has no exit to report; any other error (a write to a
      // closed channel) comes with the death its exit reports.
      this.child.on("error", (error) => {
        if (this.child.pid === undefined) die(`worker process failed to start: ${error.message}`);
      });
    });
    this.send({ type: "init", init });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  run(task: Exclude<WorkerTask, GenerateTask>): Promise<unknown> {
    return this.request(task).then(taskValue);
  }

  generate(task: Omit<GenerateTask, "port">, onEvent: (event: GenerationEvent) => void): GenerationChannel {
    const portId = this.nextId++;
    this.ports.set(portId, onEvent);
    const result = this.request(task, portId).then(taskValue);
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

  private request(task: unknown, portId?: number): Promise<TaskOutcome> {
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
    waiter.resolve(message.outcome);
  }

  /**
   * A write to a child that has just died (killed, still "connected" until the event loop
   * sees its channel close) fails with EPIPE. Without a callback Node raises that as an
   * 'error' event on the child, which, unheard, ends the host. The failure is the death the
   * 'exit' handler reports: a task it was sending is rejected there.
   */
  private send(message: HostToChild): void {
    if (this.child.connected) this.child.send(message, (error) => void error);
  }
}
