// A worker that is another Radixgate host (`models[].remote: [{kind: radixgate, url}]`): the
// router sees the whole host as one worker whose slots are all of the host's slots, and the
// host places each request on its own workers with its own tree. What the router knows of the
// host's cache comes from the host's event stream (host-events.ts), not from the router's own
// placements, so it is exact even when several routers, or the host's own clients, share the
// host; a router that starts later learns it from the stream's snapshot. Generations go to
// the host's POST /v1/radixgate/generate as token ids with the sampling settings as they are.
//
// The host is watched like a remote llama-server (remote-host.ts: /health every 2 s), and its
// event stream is part of its life: a stream that ends or goes silent is the host lost (its
// cache leaves the router's tree, requests without a first token are placed again); the
// fleet's restart connects again and starts from a fresh snapshot.
import { tokenArray, type TokenIds } from "../../common/tokens.js";
import type { GenerationResult, TokenLogprob } from "../../contract/generation.js";
import type { SamplingParams } from "../../contract/sampling.js";
import { modelFingerprint } from "../worker/model-fingerprint.js";
import type { LoadResult, ProfileResult, WorkerInit, WorkerStats } from "../wire/protocol.js";
import { cancelledInQueue } from "../wire/generation-results.js";
import { WorkerDiedError, WorkerTaskError } from "../host/worker-errors.js";
import type { CachePrecision, CacheReports, GenerateHooks, Isolation, WorkerEngine } from "../host/worker-engine.js";
import { send, sseEvents, textOf } from "../remote/http-client.js";
import { refusalOf } from "../remote/refusal.js";
import { RemoteHost, type RemoteWatch } from "../remote/remote-host.js";
import { type EngineLife, HttpEngineBase } from "../remote/engine-base.js";
import { HostMirror, hostEvents, layoutOf, type HostEvent, type HostWorkerSnapshot } from "./host-events.js";

/** No byte on the event stream for this long (the host sends one every 2 s): the host is lost. */
const EVENT_SILENCE_MS = 6000;

export interface RadixgateEngineOptions {
  url: string;
  /** The model's id on that host. */
  model: string;
  /** Sent as `Authorization: Bearer <key>` when the host wants an API key. */
  apiKey?: string;
  watch?: RemoteWatch;
  /** How long a generation waits for the first byte of its answer (default: as long as it takes). */
  firstByteTimeoutMs?: number;
}

interface Life extends EngineLife {
  server: RemoteHost;
  mirror: HostMirror;
  /** Ends the event stream. */
  stop: AbortController;
}

type GenerateEvent =
  | { type: "started"; worker: string; slot: number; cachedTokens: number }
  | { type: "text"; text: string; logprobs?: TokenLogprob[] }
  | { type: "end"; result: GenerationResult & { workerId: string } }
  | { type: "error"; error: { message: string; type: string; param: string | null; code: string | null } };

export class RadixgateEngine extends HttpEngineBase<Life> implements WorkerEngine {
  readonly kind = "radixgate";
  readonly isolation: Isolation = "remote";
  readonly precision: CachePrecision = "exact";
  readonly pid = undefined;
  private calibration: HostWorkerSnapshot["calibration"];
  private reports: CacheReports | undefined;
  private decodedTokens = 0;

  constructor(
    init: WorkerInit,
    private readonly options: RadixgateEngineOptions,
  ) {
    super(init, "a Radixgate host", options);
  }

  async start(): Promise<LoadResult> {
    const started = performance.now();
    const server = await RemoteHost.connect(this.options.url, this.options.watch, "Radixgate host");
    const stop = new AbortController();
    try {
      const events = hostEvents(server.baseURL, this.options.model, EVENT_SILENCE_MS, stop.signal, this.headers);
      // The connection's silence bound (EVENT_SILENCE_MS) also bounds the wait for the snapshot.
      const first = await events.next();
      const snapshot = first.value as HostEvent | undefined;
      if (snapshot?.type !== "snapshot") throw new Error(`${server.baseURL}'s event stream did not start with a snapshot`);
      const layout = layoutOf(snapshot);
      if (layout.totalSlots === 0) throw new Error(`${server.baseURL} has no worker serving "${this.options.model}"`);
      const fingerprint = await modelFingerprint(this.init.modelPath);
      if (snapshot.fingerprint !== undefined && snapshot.fingerprint !== fingerprint) {
        throw new Error(
          `the Radixgate host at ${server.baseURL} serves "${this.options.model}" from another model file than ${this.init.modelPath} (fingerprint ${snapshot.fingerprint} there, ${fingerprint} here): token ids would not mean the same`,
        );
      }
      const mirror = new HostMirror(layout, snapshot);
      this.calibration = snapshot.workers.find((worker) => worker.calibration !== undefined)?.calibration;
      const life: Life = { server, mirror, stop, dead: false, running: new Set(), died: Promise.resolve("") };
      this.watchLoss(life, Promise.race([server.exited, this.follow(events, mirror)]), () => {
        stop.abort();
        void server.close();
      });
      this.life = life;
      if (this.reports) mirror.listen(this.reports);
      this.loadResult = {
        workerId: this.id,
        // Its speed is the host's own: its calibration comes from the host and is cached per URL.
        backend: `radixgate ${server.baseURL}`,
        binary: "radixgate",
        contextSize: snapshot.contextSize,
        slots: layout.totalSlots,
        trainContextSize: 0,
        loadMs: performance.now() - started,
        modelFingerprint: fingerprint,
        bindingTests: { passed: [], ran: 0 },
      };
      return this.loadResult;
    } catch (error) {
      stop.abort();
      await server.close();
      throw error;
    }
  }

  /** Reads the stream until it fails; resolves with why (never while it runs). */
  private async follow(events: AsyncGenerator<HostEvent>, mirror: HostMirror): Promise<string> {
    try {
      for await (const event of events) {
        if (!mirror.apply(event)) return `the host changed shape (${event.type} event for a worker or slot it did not have at connect): connecting again`;
      }
      return "its event stream ended";
    } catch (error) {
      return `its event stream failed: ${(error as Error).message}`;
    }
  }

  reportCacheTo(reports: CacheReports): void {
    this.reports = reports;
    this.life?.mirror.listen(reports);
  }

  async restart(): Promise<LoadResult> {
    if (this.life) {
      this.life.stop.abort();
      await this.life.server.close();
    }
    return this.start();
  }

  async generate(requestId: string, prompt: TokenIds, sampling: SamplingParams, hooks: GenerateHooks = {}): Promise<GenerationResult> {
    const tokens = tokenArray(prompt);
    const life = this.life;
    if (!life || life.dead) throw new WorkerDiedError(`worker ${this.id} is down`);
    const queuedAt = performance.now();
    if (hooks.signal?.aborted) return this.count(cancelledInQueue(tokens.length, 0));
    const { abort, release, answered } = this.openGeneration(life, hooks.signal);
    this.began();
    let started = false;
    let slot = -1;
    try {
      const response = await send(
        `${life.server.baseURL}/v1/radixgate/generate`,
        "POST",
        { model: this.options.model, tokens, sampling },
        abort.signal,
        undefined,
        { ...this.headers, "x-request-id": requestId },
      );
      const text =
        response.status !== 200 || !String(response.body.headers["content-type"]).startsWith("text/event-stream") ? await textOf(response) : undefined;
      if (text !== undefined) answered();
      if (response.status !== 200) throw refusalOf(response.status, text!, `the Radixgate host at ${life.server.baseURL}`);
      if (text !== undefined) return this.count({ ...(JSON.parse(text) as { result: GenerationResult }).result, slot: -1 });
      for await (const data of sseEvents(response.body)) {
        answered();
        const event = JSON.parse(data) as GenerateEvent;
        switch (event.type) {
          case "started":
            started = true;
            slot = life.mirror.flatSlot(event.worker, event.slot) ?? -1;
            hooks.onStarted?.({ type: "started", slot, cachedTokens: event.cachedTokens, queueMs: performance.now() - queuedAt, restoredTokens: 0 });
            break;
          case "text":
            this.decodedTokens++;
            hooks.onText?.(event.text, event.logprobs);
            break;
          case "end":
            return this.count({ ...event.result, slot });
          case "error":
            throw new WorkerTaskError(`the Radixgate host at ${life.server.baseURL} failed the request after it started: ${event.error.message}`);
          default:
            event satisfies never;
        }
      }
      throw new Error("the host closed the generation's stream before its end");
    } catch (error) {
      const failure = await this.connectionFailure(
        error,
        life,
        abort,
        `request to the Radixgate host at ${life.server.baseURL} failed${started ? " after it started" : ""}`,
      );
      if (failure) throw failure;
      return this.count(cancelledInQueue(tokens.length, performance.now() - queuedAt));
    } finally {
      release();
      this.ended();
    }
  }

  /** The host's own calibration of its first worker that has one: no request is sent for it. */
  async profile(): Promise<ProfileResult> {
    if (!this.calibration) throw new WorkerTaskError(`the Radixgate host at ${this.options.url} reported no calibration for "${this.options.model}"`);
    return {
      workerId: this.id,
      slot: 0,
      prefill: this.calibration.prefill,
      decode: this.calibration.decode,
      // Without them a copy, and so a stored state's load, is priced as a recompute.
      copy: (this.calibration.copy ?? []).map(({ tokens, ms }) => ({ tokens, ms, bytes: 0 })),
      stateDir: "",
      otherBusySlots: 0,
      totalMs: 0,
    };
  }

  async stats(): Promise<WorkerStats> {
    const life = this.life;
    if (!life || life.dead) throw new WorkerDiedError(`worker ${this.id} is down`);
    return {
      steps: 0,
      decodeTokens: this.decodedTokens,
      prefillTokens: 0,
      storedStates: 0,
      storedBytes: 0,
      local: { ...this.init.local },
      slots: life.mirror.slots.map((tokens, slot) => ({ slot, tokens: tokens.length, preview: "", busy: false, idleMs: null })),
      waitingByGroup: [],
    };
  }

  /** The host runs its own local scheduler settings; the router keeps the value for /health. */
  async configure(local: WorkerInit["local"]): Promise<void> {
    this.init.local = local;
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.whenIdle();
    this.life?.stop.abort();
    await this.life?.server.close();
  }
}
