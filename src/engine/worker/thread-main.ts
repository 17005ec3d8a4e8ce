// Entry of a worker in `thread` isolation: a piscina thread whose workerData is the
// WorkerInit. Generation ports are transferred MessagePorts. In a worker thread,
// process.on("uncaughtException") and process.exit() concern this thread only.
import { workerData } from "node:worker_threads";
import type { WorkerInit } from "../wire/protocol.js";
import { createTaskHandler, failOnUncaught } from "./task-handler.js";

const handler = createTaskHandler(workerData as WorkerInit);
failOnUncaught(handler);

export default handler.run;
