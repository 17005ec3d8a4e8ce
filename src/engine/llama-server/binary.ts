// The llama-server binary a `llama-server` engine runs: built from the very llama.cpp source
// that the installed node-llama-cpp bundles (node_modules/node-llama-cpp/llama/gitRelease.bundle),
// so both engines run the same kernels and read the same GGUF the same way. The build is
// cached outside the repository, keyed by the bundle's hash:
// ~/.cache/radixgate/llama-server/<sha256[0:16]>/src/build/bin/llama-server (XDG_CACHE_HOME is
// honoured). Building takes about 20 minutes on 2 cores: `npm run build:llama-server` does it
// once; a server never builds at start-up, it says what to run instead.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync, mkdirSync, openSync, closeSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../../common/package-root.js";

const BUNDLE = join(PACKAGE_ROOT, "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle");

async function sha256(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** Where the build for the installed node-llama-cpp's llama.cpp lives (built or not). */
export async function llamaServerCacheDir(): Promise<string> {
  if (!existsSync(BUNDLE)) throw new Error(`${BUNDLE} is missing: run npm ci first`);
  const root = process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache");
  return join(root, "radixgate", "llama-server", (await sha256(BUNDLE)).slice(0, 16));
}

/** The cached build's path, whether it exists or not. */
export async function cachedLlamaServerPath(): Promise<string> {
  return join(await llamaServerCacheDir(), "src", "build", "bin", "llama-server");
}

/**
 * The binary to run: `explicit` when given (config or flag), else the cached build. Throws,
 * naming the command that builds it, when there is none.
 */
export async function findLlamaServer(explicit: string | undefined): Promise<string> {
  if (explicit) {
    if (!existsSync(explicit)) throw new Error(`llama-server binary ${explicit}: no such file`);
    return explicit;
  }
  const binary = await cachedLlamaServerPath();
  if (!existsSync(binary)) {
    throw new Error(
      `no llama-server build at ${binary}: run \`npm run build:llama-server\` once (about 20 minutes on 2 cores), or give the path of a llama-server binary built from the same llama.cpp`,
    );
  }
  return binary;
}

function run(command: string, args: string[], cwd: string, logFile: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const log = openSync(logFile, "a");
    const child = spawn(command, args, { cwd, stdio: ["ignore", log, log] });
    child.once("error", (error) => {
      closeSync(log);
      reject(error);
    });
    child.once("exit", (code) => {
      closeSync(log);
      if (code === 0) resolve();
      else reject(new Error(`${command} ${args.join(" ")} exited with ${code}; see ${logFile}`));
    });
  });
}

/** The cached build, made now when missing (minutes): clone the bundle, cmake Release, target llama-server. */
export async function findOrBuildLlamaServer(explicit: string | undefined, onProgress: (line: string) => void): Promise<string> {
  if (explicit) return findLlamaServer(explicit);
  return findOrBuildTarget("llama-server", "about 20 minutes on 2 cores", onProgress);
}

/**
 * Another program of the same cached build, made now when missing: `llama-batched-bench`,
 * llama.cpp's own decode loop, is what `npm run bench:engine-loop` measures node-llama-cpp's
 * loop against; `llama-quantize` converts the bench preset's weights for `npm run bench:peer
 * -- --weights`. Once llama-server is built they share every library and take seconds.
 */
export async function findOrBuildLlamaCppTool(target: "llama-batched-bench" | "llama-quantize", onProgress: (line: string) => void): Promise<string> {
  return findOrBuildTarget(target, "seconds once llama-server is built, about 20 minutes before", onProgress);
}

async function findOrBuildTarget(target: string, duration: string, onProgress: (line: string) => void): Promise<string> {
  const dir = await llamaServerCacheDir();
  const source = join(dir, "src");
  const binary = join(source, "build", "bin", target);
  if (existsSync(binary)) return binary;
  mkdirSync(dir, { recursive: true });
  const logFile = join(dir, "build.log");
  if (!existsSync(join(source, "CMakeLists.txt"))) {
    onProgress(`cloning llama.cpp from ${BUNDLE} into ${source}`);
    await run("git", ["clone", "--quiet", BUNDLE, source], dir, logFile);
  }
  onProgress(`building ${target} (${duration}; log: ${logFile})`);
  await run(
    "cmake",
    ["-B", "build", "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF"],
    source,
    logFile,
  );
  await run("cmake", ["--build", "build", "--target", target, "-j", "2"], source, logFile);
  if (!existsSync(binary)) throw new Error(`the build finished without ${binary}; see ${logFile}`);
  return binary;
}
