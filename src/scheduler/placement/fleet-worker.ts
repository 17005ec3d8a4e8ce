// What the placement filters read of a worker.
export interface FleetWorker {
  readonly spec: { readonly id: string; readonly modelId: string; readonly slots: number };
  alive: boolean;
  /** Requests placed on it and not finished yet. */
  inFlight: number;
}
