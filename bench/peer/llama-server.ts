// The peer Radixgate is measured against: llama-server built from the very llama.cpp source
// that the installed node-llama-cpp bundles (node_modules/node-llama-cpp/llama/gitRelease.bundle),
// so both sides run the same kernels. The binary is cached outside the repository, keyed by
// the bundle's hash: ~/.cache/radixgate/llama-server/<sha256[0:16]>/src/build/bin/llama-server
// (XDG_CACHE_HOME is honoured). Building takes about 20 minutes on 2 cores; native/README.md
// has the recipe by hand.
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync, mkdirSync, openSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const BUNDLE = fileURLToPath(new URL("../../node_modules/node-llama-cpp/llama/gitRelease.bundle", import.meta.url));

async function sha256(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** Where the binary for the installed node-llama-cpp's llama.cpp lives (built or not). */
export async function llamaServerCacheDir(): Promise<string> {
  if (!existsSync(BUNDLE)) throw new Error(`${BUNDLE} is missing: run npm ci first`);
  const root = process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache");
  return join(root, "radixgate", "llama-server", (await sha256(BUNDLE)).slice(0, 16));
}

function run(command: string, args: string[], cwd: string, logFile: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const log = openSync(logFile, "a");
    const child = spawn(command, args, { cwd, stdio: ["ignore", log, log] });
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(" ")} exited with ${code}; see ${logFile}`))));
  });
}

/** The llama-server binary: `explicit` if given, else the cached build, else built now (minutes). */
export async function findOrBuildLlamaServer(explicit: string | undefined, onProgress: (line: string) => void): Promise<string> {
  if (explicit) {
    if (!existsSync(explicit)) throw new Error(`--llama-server ${explicit}: no such file`);
    return explicit;
  }
  const dir = await llamaServerCacheDir();
  const source = join(dir, "src");
  const binary = join(source, "build", "bin", "llama-server");
  if (existsSync(binary)) return binary;
  mkdirSync(dir, { recursive: true });
  const logFile = join(dir, "build.log");
  if (!existsSync(join(source, "CMakeLists.txt"))) {
    onProgress(`cloning llama.cpp from ${BUNDLE} into ${source}`);
    await run("git", ["clone", "--quiet", BUNDLE, source], dir, logFile);
  }
  onProgress(`building llama-server (about 20 minutes on 2 cores; log: ${logFile})`);
  await run(
    "cmake",
    ["-B", "build", "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF"],
    source,
    logFile,
  );
  await run("cmake", ["--build", "build", "--target", "llama-server", "-j", "2"], source, logFile);
  if (!existsSync(binary)) throw new Error(`the build finished without ${binary}; see ${logFile}`);
  return binary;
}

export interface LlamaServerOptions {
  binary: string;
  model: string;
  slots: number;
  threads: number;
  /** Tokens per slot; the server gets slots x this in all. */
  contextPerSlot: number;
  batchSize: number;
  port: number;
}

export interface RunningLlamaServer {
  baseURL: string;
  close(): Promise<void>;
}

/** Starts llama-server and waits until /health answers 200. */
export async function startLlamaServer(options: LlamaServerOptions): Promise<RunningLlamaServer> {
  const args = [
    ["-m", options.model],
    ["-np", String(options.slots)],
    ["-t", String(options.threads)],
    ["-tb", String(options.threads)],
    ["-c", String(options.slots * options.contextPerSlot)],
    ["-b", String(options.batchSize)],
    ["--host", "127.0.0.1"],
    ["--port", String(options.port)],
    ["--no-webui"],
  ].flat();
  const child: ChildProcess = spawn(options.binary, args, { cwd: dirname(options.binary), stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const baseURL = `http://127.0.0.1:${options.port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`llama-server exited with ${child.exitCode}: ${stderr}`);
    const ok = await fetch(`${baseURL}/health`).then(
      (response) => response.status === 200,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`llama-server did not become healthy in 120 s: ${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    baseURL,
    close: async () => {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}
