// A time model for scheduler tests that do not depend on real speeds.
import type { TimeModelCoefficients } from "../../src/scheduler/time-model.js";

/** A CPU-like worker: 1 ms per prompt token, 5 ms per output token, copies at 0.01 ms per token. */
export const CPU_LIKE_COEFFICIENTS: TimeModelCoefficients = {
  base: 1,
  perExtend: 1,
  perContext: 0,
  perExtendContext: 0,
  decodeBase: 5,
  decodePerContext: 0,
  copyBase: 1,
  copyPerToken: 0.01,
};
