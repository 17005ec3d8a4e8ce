// What the placement filters read of a worker.
export interface FleetWorker {
  readonly spec: { readonly id: string; readonly modelId: string; readonly slots: number };
  alive: boolean;
  /** Requests placed on it and not finished yet. */
  inFlight: number;
  /** Kept out of placement while up (its circuit breaker is open); its cache stays known. */
  held?: boolean;
  /** Requests on it from other routers, as it reports them (0 for a worker only this host uses). */
  othersInFlight?: number;
}
