// The `radixgate` command (src/cli/): `node dist/main.js serve` is what `npm start` runs.
import { runCli } from "./cli/program.js";

const status = await runCli(process.argv.slice(2));
// A command that finished leaves the process to end on its own (serve keeps it up).
if (status !== undefined) process.exit(status);
