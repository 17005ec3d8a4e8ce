#!/usr/bin/env node
// The `radixgate` command: compiles src/ to dist/ first when dist/ is missing or stale (as
// `npm start` does), then runs the compiled command line (src/cli/).
import "../scripts/ensure-build.mjs";
await import("../dist/main.js");
