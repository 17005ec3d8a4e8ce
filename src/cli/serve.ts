// `radixgate serve` (and `npm start`): read the config, make the default model if it is
// missing, start the workers and serve the OpenAI API until SIGINT or SIGTERM.
import { loadConfigFile, resolveConfigPath, type LoadedConfig } from "../config/load-config.js";
import { createRadixgate } from "../radixgate.js";

export interface ServeOptions {
  config?: string;
  port?: number;
  host?: string;
  policy?: string;
}

/** The environment the config is read with: the command line's options win over the variables they stand for. */
export function overriddenEnv(options: ServeOptions, env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return {
    ...env,
    ...(options.port !== undefined ? { PORT: String(options.port) } : {}),
    ...(options.host !== undefined ? { HOST: options.host } : {}),
    ...(options.policy !== undefined ? { RADIXGATE_POLICY: options.policy } : {}),
  };
}

/** The config file the options name, read with their overrides (serve and check read it alike). */
export function loadConfigFor(options: ServeOptions): LoadedConfig {
  const env = overriddenEnv(options);
  return loadConfigFile(resolveConfigPath(options.config, env), env);
}

/**
 * The malloc this process runs with. Thread workers free a model and a context on every
 * restart; glibc keeps most of that in its per-thread arenas (RSS climbs restart after
 * restart), jemalloc gives it back. `npm start` preloads jemalloc when the system has it.
 */
export function allocatorOf(env: NodeJS.ProcessEnv = process.env): "jemalloc" | "glibc" {
  return env.LD_PRELOAD?.includes("jemalloc") ? "jemalloc" : "glibc";
}

export async function serve(options: ServeOptions): Promise<void> {
  const loaded = loadConfigFor(options);
  const radixgate = await createRadixgate(loaded);
  const address = await radixgate.listen();
  radixgate.app.log.info(
    {
      models: loaded.config.models.map((model) => model.id),
      workers: radixgate.fleet.workers.map((worker) => worker.engine.id),
      policy: loaded.config.scheduler.policy,
    },
    `Radixgate serving on ${address} (config ${loaded.path})`,
  );
  const threadWorkers = radixgate.fleet.workers.filter((worker) => worker.engine.isolation === "thread").length;
  if (threadWorkers > 0 && allocatorOf() === "glibc") {
    radixgate.app.log.warn(
      `${threadWorkers} thread worker(s) on glibc's malloc: memory freed by a worker restart mostly stays with the process. ` +
        "Install jemalloc (apt install libjemalloc2) and start with npm start, or set LD_PRELOAD to libjemalloc.so.2 yourself.",
    );
  }
  // Live config: SIGHUP or an edit of the file (hot-reload.ts says which keys apply live).
  radixgate.reloader.watchFile();
  process.on("SIGHUP", () => void radixgate.reloader.reload("SIGHUP"));
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    const timeoutMs = radixgate.reloader.config.server.shutdownTimeoutMs;
    radixgate.app.log.info(`${signal}: no new connections; in-flight requests get ${timeoutMs} ms to finish`);
    radixgate.shutdown(timeoutMs).then(
      () => process.exit(0),
      (error: unknown) => {
        radixgate.app.log.error({ err: error }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
}
