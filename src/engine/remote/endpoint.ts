// Where an engine's requests go: a llama-server process this host started
// (../llama-server/server-process.ts) or a server someone else runs at a URL (remote-host.ts:
// a llama-server or another Radixgate host). The engine sees only this.

export interface EngineEndpoint {
  readonly baseURL: string;
  /** The process id when this host started it; undefined for a remote server. */
  readonly pid: number | undefined;
  /** Resolves with how it was lost: the process exited, or the remote server stopped answering. */
  readonly exited: Promise<string>;
  /** Fault injection: the process is killed; a remote server is dropped as if it had stopped answering. */
  kill(): void;
  /**
   * A request to it just lost its connection: is the server gone? A process answers from its
   * exit, a remote server from a health check made now. True once `exited` has resolved.
   */
  confirmLost(): Promise<boolean>;
  /** Stops it (ours) or stops watching it (remote). */
  close(graceMs?: number): Promise<void>;
}
