// Entry of a worker in `process` isolation: a child Node process of its own (one per GPU,
// started with CUDA_VISIBLE_DEVICES / GGML_VK_VISIBLE_DEVICES), so a native abort in
// llama.cpp takes down this worker only, never the host. It speaks the same tasks as a
// thread over Node's IPC channel; a generation's port is an IPC-backed stand-in.
import type { GenerationControl, GenerationEvent, GenerationPort, WorkerInit, WorkerTask } from "../wire/protocol.js";
import type { HostToChild, ChildToHost } from "../wire/process-protocol.js";
import { createTaskHandler, failOnUncaught, type TaskHandler } from "./task-handler.js";

let handler: TaskHandler | undefined;
const ports = new Map<number, (message: GenerationControl) => void>();

function send(message: ChildToHost): void {
  process.send?.(message);
}

function portFor(portId: number): GenerationPort {
  return {
    on: (_event, listener) => ports.set(portId, listener),
    postMessage: (message: GenerationEvent) => send({ type: "port", portId, message }),
    close: () => ports.delete(portId),
  };
}

process.on("message", (message: HostToChild) => {
  switch (message.type) {
    case "init":
      // The channel's descriptor lets the generation loop see a message waiting (WorkerInit.channelFd).
      handler = createTaskHandler({ ...(message.init as WorkerInit), channelFd: (process.channel as { fd?: number } | undefined)?.fd });
      failOnUncaught(handler);
      return;
    case "port":
      ports.get(message.portId)?.(message.message);
      return;
    case "task": {
      const task = message.task as WorkerTask;
      const withPort = task.kind === "generate" && message.portId !== undefined ? { ...task, port: portFor(message.portId) } : task;
      void handler!.run(withPort).then((outcome) => send({ type: "outcome", id: message.id, outcome }));
      return;
    }
    default:
      message satisfies never;
  }
});

// The host going away (its IPC channel closing) ends this worker too.
process.on("disconnect", () => process.exit(0));
