// A host process for the test that kills it: starts one llama-server worker on the model
// given as argv[2], prints the server's pid as a JSON line, then waits to be killed.
import { findLlamaServer } from "../../src/engine/llama-server/binary.js";
import { LlamaServerEngine } from "../../src/engine/llama-server/llama-server-engine.js";
import { workerInit } from "./worker-init.js";

const engine = new LlamaServerEngine(workerInit(process.argv[2]!, { workerId: "orphan-test", slots: 1, contextSize: 256 }), {
  binary: await findLlamaServer(undefined),
});
await engine.start();
process.stdout.write(`${JSON.stringify({ pid: engine.pid })}\n`);
setInterval(() => undefined, 60_000);
