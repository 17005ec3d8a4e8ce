// Entry of a worker in `thread` isolation: a piscina thread whose workerData is the
// WorkerInit. Generation ports are transferred MessagePorts.
import { workerData } from "node:worker_threads";
import type { WorkerInit } from "../wire/protocol.js";
import { createTaskHandler } from "./task-handler.js";

export default createTaskHandler(workerData as WorkerInit);
