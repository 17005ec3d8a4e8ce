// `npm start`: read config.yml (or --config / RADIXGATE_CONFIG), make the default model if
// it is missing, start the workers and serve the OpenAI API.
import { ConfigError, loadConfigFile, resolveConfigPath } from "./config/load-config.js";
import { createRadixgate } from "./radixgate.js";

async function main(): Promise<void> {
  const loaded = loadConfigFile(resolveConfigPath(process.argv.slice(2), process.env));
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

main().catch((error: unknown) => {
  // Config mistakes are the operator's to fix: one clear message, no stack trace.
  if (error instanceof ConfigError) console.error(`radixgate: ${error.message}`);
  else console.error("radixgate: failed to start:", error);
  process.exit(1);
});
