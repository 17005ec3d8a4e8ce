// Remote engines found by name (`models[].remote[].discover: dns`): the URL's host name stands
// for every address it resolves to, which is how a Kubernetes headless service presents its
// pods. Each address is one worker; the name is resolved again every `discoverEveryS` (30 s by
// default): an address that appears joins (calibrated, then placed on, like a remote engine
// that answers late), one that vanished leaves the fleet, the scheduler and the metrics (its
// requests end first). A failed resolution changes nothing: a DNS hiccup must not empty the
// fleet.
import { lookup } from "node:dns/promises";
import type { Config } from "../config/schema.js";
import type { Fleet } from "./fleet.js";
import type { ServingLog } from "./serving-log.js";

/** Every address a host name resolves to now. */
export type ResolveHost = (host: string) => Promise<string[]>;

export const resolveHostAddresses: ResolveHost = async (host) => (await lookup(host, { all: true })).map((entry) => entry.address);

const DEFAULT_EVERY_S = 30;

/** `url` with its host replaced by `address` (an IPv6 address in brackets), without a trailing slash. */
export function urlAt(url: string, address: string): string {
  const parsed = new URL(url);
  parsed.hostname = address.includes(":") ? `[${address}]` : address;
  const text = parsed.toString();
  return new URL(url).pathname === "/" && !url.endsWith("/") ? text.replace(/\/$/, "") : text;
}

interface Entry {
  modelId: string;
  entry: number;
  url: string;
  everyMs: number;
}

export class RemoteDiscovery {
  private readonly entries: Entry[];
  private readonly timers: NodeJS.Timeout[] = [];
  private stopped = false;

  constructor(
    config: Config,
    private readonly fleet: Fleet,
    private readonly resolve: ResolveHost,
    private readonly log: ServingLog,
  ) {
    this.entries = config.models.flatMap((model) =>
      model.remote.flatMap((remote, entry) =>
        remote.discover === "dns" ? [{ modelId: model.id, entry, url: remote.url, everyMs: (remote.discoverEveryS ?? DEFAULT_EVERY_S) * 1000 }] : [],
      ),
    );
  }

  /** Resolves each name again on its own period, from now on. */
  start(): void {
    for (const entry of this.entries) {
      const tick = () => {
        if (this.stopped) return;
        void this.refreshEntry(entry).finally(() => {
          if (this.stopped) return;
          const timer = setTimeout(tick, entry.everyMs);
          timer.unref();
          this.timers.push(timer);
        });
      };
      const timer = setTimeout(tick, entry.everyMs);
      timer.unref();
      this.timers.push(timer);
    }
  }

  /** Resolves every name now and brings the fleet in line (also what the timer does). */
  async refresh(): Promise<void> {
    await Promise.all(this.entries.map((entry) => this.refreshEntry(entry)));
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
  }

  private async refreshEntry({ modelId, entry, url }: Entry): Promise<void> {
    const host = new URL(url).hostname;
    let addresses: string[];
    try {
      addresses = await this.resolve(host);
    } catch (error) {
      this.log.warn({ host, reason: (error as Error).message }, "remote engine discovery: the name did not resolve; keeping the engines found before");
      return;
    }
    if (this.stopped) return;
    const wanted = new Set(addresses.map((address) => urlAt(url, address)));
    const found = this.fleet.workers.filter((worker) => worker.modelId === modelId && worker.discoveredAs?.entry === entry);
    for (const worker of found) {
      if (wanted.has(worker.discoveredAs!.url)) continue;
      this.log.info({ worker: worker.engine.id, url: worker.discoveredAs!.url, host }, "remote engine left the name's addresses; retiring it");
      await this.fleet.retire(worker.engine.id);
    }
    const known = new Set(found.map((worker) => worker.discoveredAs!.url));
    for (const address of wanted) {
      if (known.has(address)) continue;
      const worker = await this.fleet.addDiscovered(modelId, entry, address);
      this.log.info({ worker: worker.engine.id, url: address, host }, "remote engine found by name; it joins when it answers");
    }
  }
}
