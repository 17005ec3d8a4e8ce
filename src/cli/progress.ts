// A progress bar on the terminal (stderr), and nothing of the kind when stderr is not one:
// logs and pipes never see bar redraws. Lines logged while a bar runs print above it.
import { MultiBar, Presets, type SingleBar } from "cli-progress";

export interface Progress {
  update(done: number, total: number): void;
  /** A line for the person or the log: above the bar on a terminal, as is elsewhere. */
  log(line: string): void;
  stop(): void;
}

/**
 * A bar labelled `label`, counting in `unit`; `scale` turns the counts into that unit
 * (e.g. bytes to MiB). Off a terminal only log() writes.
 */
export function terminalProgress(label: string, unit: string, scale = 1, stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!stream.isTTY) return { update() {}, log: (line) => void stream.write(`${line}\n`), stop() {} };
  const bars = new MultiBar(
    { format: `${label} {bar} {percentage}% | {value}/{total} ${unit}`, stream, hideCursor: true, clearOnComplete: false },
    Presets.shades_classic,
  );
  let bar: SingleBar | undefined;
  const round = (count: number) => Math.round((count / scale) * 10) / 10;
  return {
    update(done, total) {
      if (!bar) bar = bars.create(round(total), round(done));
      else bar.update(round(done));
    },
    log: (line) => bars.log(`${line}\n`),
    stop() {
      // Lines logged since the last redraw are printed by a redraw, not by stop().
      bars.update();
      bars.stop();
    },
  };
}

/** A bar counting bytes in MiB. */
export function bytesProgress(label: string, stream: NodeJS.WriteStream = process.stderr): Progress {
  return terminalProgress(label, "MiB", 1024 * 1024, stream);
}
