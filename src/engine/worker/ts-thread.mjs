// Bootstrap of a worker thread when Radixgate runs from its TypeScript sources (npm start
// and the tests run under tsx). Node 20 cannot start a .ts thread file itself, and tsx's
// `--import` hook fails in worker threads that import node-llama-cpp (measured), so this
// plain module loads the real entry, named by `--thread-entry <url>` in the thread's argv,
// through tsx's API and re-exports its task handler.
import { tsImport } from "tsx/esm/api";

const flag = process.argv.indexOf("--thread-entry");
if (flag < 0) throw new Error("ts-thread.mjs needs --thread-entry <file URL> in the thread's argv");
const entry = await tsImport(process.argv[flag + 1], import.meta.url);

export default entry.default;
