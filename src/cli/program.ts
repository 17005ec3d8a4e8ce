// The `radixgate` command line: serve, check, make-model, build-llama-server, bench. Every command has --help;
// the exit status says what happened (exit-codes.ts).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { ConfigError } from "../config/load-config.js";
import { PACKAGE_ROOT } from "../common/package-root.js";
import { ModelSourceError } from "../engine/host/model-source.js";
import { findOrBuildLlamaServer } from "../engine/llama-server/binary.js";
import { DEFAULT_SEED, makeModel, PRESETS } from "../presets/make-model.js";
import { POLICY_NAMES } from "../scheduler/registry.js";
import { listBenchmarks, runBenchmark } from "./bench.js";
import { checkConfig, formatCheckReport } from "./check.js";
import { EXIT, UsageError } from "./exit-codes.js";
import { bytesProgress } from "./progress.js";
import { serve, type ServeOptions } from "./serve.js";

function integer(min: number, max: number): (value: string) => number {
  return (value) => {
    const parsed = Number(value);
    if (!/^\d+$/.test(value) || parsed < min || parsed > max) throw new InvalidArgumentError(`an integer from ${min} to ${max}`);
    return parsed;
  };
}

/** The options that choose and override the config: serve and check take the same (cli/serve.ts reads them). */
function withConfigOptions(command: Command): Command {
  return command
    .addOption(new Option("-c, --config <path>", "config file (default: $RADIXGATE_CONFIG, else ./config.yml)"))
    .addOption(new Option("-p, --port <port>", "listen port; 0 = any free port (overrides server.port and $PORT)").argParser(integer(0, 65535)))
    .addOption(new Option("--host <address>", "listen address (overrides server.host and $HOST)"))
    .addOption(new Option("--policy <name>", "placement policy (overrides scheduler.policy and $RADIXGATE_POLICY)").choices(POLICY_NAMES));
}

export function buildProgram(): Command {
  const { version } = JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")) as { version: string };
  const program = new Command("radixgate")
    .description("OpenAI-compatible server for GGUF models, with prefix-aware placement over one llama.cpp worker per GPU")
    .version(version)
    .showHelpAfterError("(add --help for usage)")
    .enablePositionalOptions()
    // Usage mistakes exit 2, not commander's 1 (1 means a command ran and failed).
    .exitOverride((error) => {
      throw error;
    });

  withConfigOptions(program.command("serve").description("start the workers and serve the OpenAI API until SIGINT or SIGTERM")).action(
    (options: ServeOptions) => serve(options),
  );

  withConfigOptions(program.command("check").description("validate a config file and print the resolved settings, the GPUs found and which worker runs where"))
    .option("--json", "print the report as JSON")
    .action(async (options: ServeOptions & { json?: boolean }) => {
      const report = await checkConfig(options);
      process.stdout.write(options.json ? `${JSON.stringify(report, null, 2)}\n` : formatCheckReport(report));
    });

  program
    .command("make-model")
    .description("generate a preset GGUF model (random weights, ChatML template); no download")
    .addOption(new Option("--preset <name>", "which model").choices(Object.keys(PRESETS)).default("tiny"))
    .addOption(new Option("--seed <n>", "weights seed: same seed, same bytes").argParser(integer(0, 0xffffffff)).default(DEFAULT_SEED))
    .option("--out <path>", "file to write (default: models/<preset>.gguf)")
    .action(async (options: { preset: keyof typeof PRESETS; seed: number; out?: string }) => {
      const started = performance.now();
      const progress = bytesProgress(`writing ${options.preset}`);
      const made = await makeModel({ preset: options.preset, seed: options.seed, outPath: options.out, onProgress: progress.update }).finally(progress.stop);
      const seconds = ((performance.now() - started) / 1000).toFixed(2);
      process.stdout.write(
        `${made.path}\n  preset=${options.preset} seed=${options.seed} parameters=${made.parameters} bytes=${made.bytes} sha256=${made.sha256} (${seconds}s)\n`,
      );
    });

  program
    .command("build-llama-server")
    .description(
      "build llama-server from the llama.cpp source node-llama-cpp bundles (for `engine: llama-server`; about 20 minutes on 2 cores, cached outside the repository); prints its path",
    )
    .action(async () => {
      const binary = await findOrBuildLlamaServer(undefined, (line) => process.stderr.write(`${line}\n`));
      process.stdout.write(`${binary}\n`);
    });

  program
    .command("bench")
    .description("run a benchmark (needs the development install: npm ci); without a name, list them")
    .argument("[name]", "which benchmark")
    .argument("[args...]", "passed to the benchmark, e.g. --quick")
    .passThroughOptions()
    .allowUnknownOption()
    .action(async (name: string | undefined, args: string[]) => {
      if (name === undefined) {
        process.stdout.write(`benchmarks:\n${listBenchmarks()}\n`);
        return;
      }
      process.exitCode = await runBenchmark(name, args);
    });

  return program;
}

/** Runs the command line; resolves with the exit status for errors before or around the command. */
export async function runCli(argv: readonly string[]): Promise<number | undefined> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv], { from: "user" });
    return undefined;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    // The operator's mistakes: one clear line, no stack trace.
    if (error instanceof ConfigError || error instanceof ModelSourceError || error instanceof UsageError) {
      process.stderr.write(`radixgate: ${error.message}\n`);
      return EXIT.usage;
    }
    process.stderr.write(`radixgate: failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    return EXIT.failed;
  }
}
