// What the serving parts that run on their own (discovery, the session store) log through:
// the server's logger, or a test's.
export interface ServingLog {
  info(data: object, message: string): void;
  warn(data: object, message: string): void;
}
