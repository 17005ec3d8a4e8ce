// A progress bar on the terminal (stderr), and nothing at all when stderr is not one: logs and
// pipes never see bar redraws.
import { Presets, SingleBar } from "cli-progress";

export interface Progress {
  update(done: number, total: number): void;
  stop(): void;
}

const MiB = 1024 * 1024;

/** A bar counting bytes in MiB, labelled `label`; a no-op off a terminal. */
export function bytesProgress(label: string, stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!stream.isTTY) return { update() {}, stop() {} };
  const bar = new SingleBar(
    { format: `${label} {bar} {percentage}% | {value}/{total} MiB`, stream, hideCursor: true, clearOnComplete: false },
    Presets.shades_classic,
  );
  let started = false;
  return {
    update(done, total) {
      const value = Math.round((done / MiB) * 10) / 10;
      const end = Math.round((total / MiB) * 10) / 10;
      if (!started) bar.start(end, value);
      else bar.update(value);
      started = true;
    },
    stop() {
      if (started) bar.stop();
    },
  };
}
