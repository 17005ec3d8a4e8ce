// What the tests of engines elsewhere start: real llama-servers of the tiny model (the build
// `npm test` makes), each with its own slot folder, and free loopback ports.
import { mkdtempSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findLlamaServer } from "../../src/engine/llama-server/binary.js";
import { LlamaServerProcess, llamaServerArgs } from "../../src/engine/llama-server/server-process.js";
import { ensureModel } from "../../src/presets/make-model.js";

/** `count` llama-servers of the tiny model, 2 slots of 2048 tokens, one thread, no RAM prompt cache. */
export async function startLlamaServers(count: number, options: { port?: number; extraArgs?: string[] } = {}): Promise<LlamaServerProcess[]> {
  const modelPath = await ensureModel("tiny");
  const binary = await findLlamaServer(undefined);
  const servers: LlamaServerProcess[] = [];
  for (let i = 0; i < count; i++) {
    servers.push(
      await LlamaServerProcess.start({
        binary,
        ...(options.port !== undefined ? { port: options.port } : {}),
        args: [
          ...llamaServerArgs({ modelPath, slots: 2, contextPerSlot: 2048, batchSize: 512, threads: 1, gpu: false }),
          ...["--cache-ram", "0", "--slot-save-path", mkdtempSync(join(tmpdir(), "radixgate-remote-"))],
          ...(options.extraArgs ?? []),
        ],
      }),
    );
  }
  return servers;
}

/** A loopback port free now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
