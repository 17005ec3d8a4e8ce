// What the command line's exit status means (the README lists them).
export const EXIT = {
  ok: 0,
  /** The command ran and failed: the server could not start, a benchmark failed. */
  failed: 1,
  /** Nothing ran: a wrong command, option or config file; the message says what is allowed. */
  usage: 2,
} as const;

/** A mistake in what the operator asked for: reported in one line, exit status 2. */
export class UsageError extends Error {
  override name = "UsageError";
}
