// Builds native/llama-context (what Radixgate adds to node-llama-cpp contexts from native code:
// a persistent llama.cpp CPU thread pool, and decoding on the calling thread; native/README.md)
// against the installed node-llama-cpp: its addon headers, and
// llama.cpp's headers taken from the source bundle it ships (the source its binaries were
// built from), so the addon reads node-llama-cpp's objects with the binary's own layout.
//
//   node scripts/build-native.mjs [--force] [--strict]
//
// Writes node_modules/.cache/radixgate/llama-context/<key>.node and current.json (what the
// workers load: src/engine/worker/context-addon.ts). The key covers the sources, the bundle,
// node-llama-cpp's version and Node's ABI, so a new install or Node builds it again. Needs
// git, tar and a C++ compiler; about 5 s. Without them it says what is missing and exits 0
// (workers then run without the pool, slower with more than one thread), or 1 with --strict.
// Plain JavaScript: `npm start` runs it before anything is compiled.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const force = process.argv.includes("--force");
const strict = process.argv.includes("--strict");
const sourceDir = join(root, "native", "llama-context");
// Every file of the folder keys the build, and every .cpp in it is compiled into the one addon.
const sourceFiles = readdirSync(sourceDir)
  .sort()
  .map((name) => join(sourceDir, name));
const sources = sourceFiles.filter((file) => file.endsWith(".cpp"));
const nodeLlamaCpp = join(root, "node_modules", "node-llama-cpp");
const bundle = join(nodeLlamaCpp, "llama", "gitRelease.bundle");
const outDir = join(root, "node_modules", ".cache", "radixgate", "llama-context");

class BuildError extends Error {}

function fail(message) {
  throw new BuildError(message);
}

function giveUp(message) {
  process.stderr.write(`radixgate: the llama-context addon (compute thread pool, inline decode) was not built: ${message}\n`);
  if (strict) process.exit(1);
  process.stderr.write("radixgate: workers will run without it (slower: more so with threads > 1); run `npm run build:native` once the cause is fixed\n");
  process.exit(0);
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024, ...options });
  if (result.error) fail(`${command} could not run (${result.error.code ?? result.error.message}): install it`);
  if (result.status !== 0) fail(`${command} ${args.slice(0, 3).join(" ")} ... failed:\n${(result.stderr || result.stdout || "").trim().slice(-2000)}`);
  return result.stdout;
}

function build() {
  if (!existsSync(bundle)) fail(`${bundle} is missing: run npm ci first`);
  const nodeLlamaCppVersion = JSON.parse(readFileSync(join(nodeLlamaCpp, "package.json"), "utf8")).version;
  const hash = createHash("sha256");
  for (const file of sourceFiles) hash.update(file.slice(sourceDir.length)).update(readFileSync(file));
  const key = hash
    .update(readFileSync(bundle))
    .update(`${nodeLlamaCppVersion}\0${process.versions.modules}\0${process.platform}-${process.arch}`)
    .digest("hex")
    .slice(0, 16);
  const binary = join(outDir, `${key}.node`);
  const manifest = { file: `${key}.node`, nodeLlamaCppVersion, nodeAbi: process.versions.modules, platform: `${process.platform}-${process.arch}` };
  const writeManifest = () => writeFileSync(join(outDir, "current.json"), `${JSON.stringify(manifest, null, 2)}\n`);

  if (existsSync(binary) && !force) {
    writeManifest();
    return;
  }
  if (process.platform !== "linux") fail(`only Linux builds are set up (this is ${process.platform})`);

  // Node's own headers: next to the running node (a system or nvm install), or npm's nodedir.
  const nodeInclude = [
    resolve(dirname(process.execPath), "..", "include", "node"),
    process.env.npm_config_nodedir && join(process.env.npm_config_nodedir, "include", "node"),
  ]
    .filter(Boolean)
    .find((dir) => existsSync(join(dir, "node_api.h")));
  if (!nodeInclude) fail(`Node's headers (node_api.h) are not next to ${process.execPath}`);

  const work = mkdtempSync(join(tmpdir(), "radixgate-native-"));
  try {
    // llama.cpp's public headers at the bundle's commit, without checking out the whole tree.
    const git = join(work, "llama.cpp.git");
    run("git", ["init", "-q", "--bare", git]);
    const heads = run("git", ["-C", git, "bundle", "unbundle", bundle]);
    const commit = heads.trim().split(/\s+/)[0];
    if (!/^[0-9a-f]{40}$/.test(commit ?? "")) fail(`the bundle names no commit (${heads.trim()})`);
    const archive = join(work, "headers.tar");
    run("git", ["-C", git, "archive", "--format=tar", "-o", archive, commit, "include", "ggml/include"]);
    const headers = join(work, "llama.cpp");
    mkdirSync(headers);
    run("tar", ["-xf", archive, "-C", headers]);

    mkdirSync(outDir, { recursive: true });
    const partial = `${binary}.${process.pid}.tmp`;
    const compiler = process.env.CXX || "g++";
    run(compiler, [
      "-std=c++17",
      "-O2",
      "-shared",
      "-fPIC",
      "-fvisibility=hidden",
      // node-llama-cpp's addon is compiled with this N-API version (its llama/CMakeLists.txt).
      "-DNAPI_VERSION=7",
      `-I${nodeInclude}`,
      `-I${join(nodeLlamaCpp, "llama", "addon")}`,
      `-I${join(root, "node_modules", "node-addon-api")}`,
      `-I${join(headers, "include")}`,
      `-I${join(headers, "ggml", "include")}`,
      "-o",
      partial,
      ...sources,
      "-ldl",
    ]);
    renameSync(partial, binary);
    writeManifest();
    // Builds for an earlier install or Node are no longer loaded.
    for (const name of readdirSync(outDir)) if (name.endsWith(".node") && join(outDir, name) !== binary) rmSync(join(outDir, name), { force: true });
    process.stderr.write(`radixgate: built the llama-context addon (${binary})\n`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

try {
  build();
} catch (error) {
  if (!(error instanceof BuildError)) throw error;
  giveUp(error.message);
}
