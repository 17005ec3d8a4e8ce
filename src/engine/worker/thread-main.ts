// Entry of a worker in `thread` isolation: a piscina thread whose data is the WorkerInit. Generation ports are transferred MessagePorts. In a worker thread,
// process.on("uncaughtException") and process.exit() concern this thread only.
import type { WorkerInit } from "../wire/protocol.js";
import { createTaskHandler, failOnUncaught } from "./task-handler.js";
import { threadData } from "./thread-data.js";

const handler = createTaskHandler(threadData<WorkerInit>());
failOnUncaught(handler);

export default handler.run;
