// Compiles src/ to dist/ when dist/ is missing or older than any source (`npm start` runs it
// first, so `npm ci && npm start` works on a fresh clone and after every edit), or always
// with --force (`npm run build`). Plain JavaScript: it runs before anything is compiled.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const stamp = join(root, "dist", ".build-stamp");

/** The newest modification time among the files that go into the build. */
function newestInput() {
  let newest = 0;
  const visit = (path) => {
    const stat = statSync(path);
    if (stat.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
    else newest = Math.max(newest, stat.mtimeMs);
  };
  for (const input of ["src", "tsconfig.json", "tsconfig.build.json", "package-lock.json"]) visit(join(root, input));
  return newest;
}

const builtAt = existsSync(stamp) ? statSync(stamp).mtimeMs : 0;
if (process.argv.includes("--force") || builtAt < newestInput()) {
  process.stderr.write("radixgate: compiling src/ to dist/\n");
  // From scratch: a source deleted since the last build must not linger as JavaScript.
  rmSync(join(root, "dist"), { recursive: true, force: true });
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  const result = spawnSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { stdio: "inherit" });
  if (result.status !== 0) {
    process.stderr.write("radixgate: the build failed (above); fix the error or run from the sources with `npm run dev`\n");
    process.exit(result.status ?? 1);
  }
  writeFileSync(stamp, `${new Date().toISOString()}\n`);
}
