// The load generator's process (see load-process.ts): runs one phase of the mix against the
// server and sends every request's record back to the parent.
//   capacity  closed loop: `concurrency` clients, each sending its next request as soon as
//             the previous one is answered
//   soak      open loop: Poisson arrivals at `ratePerS`, whatever the server's pace
import { monitorEventLoopDelay } from "node:perf_hooks";
import { sendRequest, type RequestRecord } from "./client.js";
import type { LoadMessage, LoadPlan } from "./load-process.js";
import { RequestMix } from "./mix.js";
import { percentile } from "./stats.js";
import { mulberry32 } from "../../src/common/random.js";

const plan = JSON.parse(process.argv[2] ?? "{}") as LoadPlan;
const send = (message: LoadMessage, then?: () => void) => process.send!(message, undefined, undefined, then);

const mix = new RequestMix({ model: plan.model, seed: plan.seed, salt: plan.salt });
const records: RequestRecord[] = [];
const lateness: number[] = [];
const lag = monitorEventLoopDelay({ resolution: 10 });
lag.enable();

const phaseMs = plan.seconds * 1000;
const start = performance.now();
send({ type: "started" });

if (plan.phase === "capacity") {
  const client = async () => {
    while (performance.now() - start < phaseMs) records.push(await sendRequest(plan.url, mix.next(), start, plan.hangMs));
  };
  await Promise.all(Array.from({ length: plan.concurrency ?? 8 }, client));
} else {
  const rate = plan.ratePerS ?? 1;
  const random = mulberry32(plan.seed ^ 0x5eed);
  const inFlight = new Set<Promise<void>>();
  let dueMs = 0;
  for (;;) {
    dueMs += (-Math.log(1 - random()) / rate) * 1000;
    if (dueMs >= phaseMs) break;
    const waitMs = start + dueMs - performance.now();
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
    lateness.push(Math.max(0, performance.now() - start - dueMs));
    const request: Promise<void> = sendRequest(plan.url, mix.next(), start, plan.hangMs).then((record) => {
      records.push(record);
      inFlight.delete(request);
    });
    inFlight.add(request);
  }
  await Promise.all(inFlight);
}

lag.disable();
send(
  {
    type: "done",
    records: records.sort((a, b) => a.sentAtMs - b.sentAtMs),
    health: {
      transcriptSource: mix.transcriptSource,
      eventLoopLagP99Ms: lag.percentile(99) / 1e6,
      arrivalLatenessP99Ms: percentile(lateness, 99),
      arrivalLatenessMaxMs: lateness.reduce((max, ms) => Math.max(max, ms), lateness.length > 0 ? 0 : Number.NaN),
    },
  },
  () => process.disconnect(),
);
