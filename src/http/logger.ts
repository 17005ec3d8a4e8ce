// The server's log output: one JSON line per event for machines (the default off a terminal),
// readable coloured lines for a person at a terminal (pino-pretty, written synchronously in
// this thread: no transport thread).
import type { FastifyServerOptions } from "fastify";
import pretty from "pino-pretty";

export type LogFormat = "auto" | "json" | "pretty";

/** Whether the lines are pretty: `auto` asks whether stdout is a terminal. */
export function isPretty(format: LogFormat, stdoutIsTerminal: boolean): boolean {
  return format === "pretty" || (format === "auto" && stdoutIsTerminal);
}

export function loggerOptions(
  level: string,
  format: LogFormat,
  stdoutIsTerminal = process.stdout.isTTY === true,
  env: NodeJS.ProcessEnv = process.env,
): FastifyServerOptions["logger"] {
  if (!isPretty(format, stdoutIsTerminal)) return { level };
  return {
    level,
    stream: pretty({
      // Colour only for a terminal, and never when NO_COLOR is set (no-color.org).
      colorize: stdoutIsTerminal && !env.NO_COLOR,
      sync: true,
      translateTime: "SYS:HH:MM:ss.l",
      ignore: "pid,hostname",
      singleLine: true,
    }),
  };
}
