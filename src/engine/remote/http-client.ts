// Requests to an engine server (a llama-server, ours or a remote one; another Radixgate host),
// each on a connection of its own. Reusing kept-alive connections (what fetch does) races with
// the server closing an idle one: a request written just as it closes fails with "other side
// closed" although the server never saw it, and a generation cannot be sent twice blindly. A
// fresh loopback connection costs well under a millisecond; a generation takes far longer.
import { request, type IncomingMessage } from "node:http";

export interface ServerResponse {
  status: number;
  body: IncomingMessage;
}

/**
 * Sends one request; resolves once the response's status line is in. Aborting the signal
 * closes the connection; so does `timeoutMs` of silence on it (connect included), with an error.
 */
export function send(
  url: string,
  method: "GET" | "POST",
  body?: unknown,
  signal?: AbortSignal,
  timeoutMs?: number,
  headers: Record<string, string> = {},
): Promise<ServerResponse> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const outgoing = request(
      url,
      {
        method,
        agent: false,
        headers: payload === undefined ? headers : { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
        ...(signal ? { signal } : {}),
      },
      (response) => resolve({ status: response.statusCode ?? 0, body: response }),
    );
    outgoing.once("error", reject);
    if (timeoutMs !== undefined) {
      outgoing.setTimeout(timeoutMs, () => outgoing.destroy(new Error(`no answer from ${new URL(url).host} in ${timeoutMs} ms`)));
    }
    outgoing.end(payload);
  });
}

/** The whole body as text. */
export async function textOf(response: ServerResponse): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of response.body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Where a server says it is up, and what the request needs (an OpenAI server's /v1/models wants its key). */
export interface HealthProbe {
  path: string;
  headers?: Record<string, string>;
}

const HEALTH: HealthProbe = { path: "/health" };

/** "" when GET `probe.path` (/health) answers 200 within `timeoutMs`, else what went wrong. */
export async function healthProblem(baseURL: string, timeoutMs: number, probe: HealthProbe = HEALTH): Promise<string> {
  try {
    const response = await send(`${baseURL}${probe.path}`, "GET", undefined, undefined, timeoutMs, probe.headers);
    response.body.resume();
    return response.status === 200 ? "" : `${probe.path} answered ${response.status}`;
  } catch (error) {
    return (error as Error).message;
  }
}

/**
 * Polls /health every `pollMs` until it answers 200. Rejects after `readyTimeoutMs` with the
 * last problem, or at once when `gaveUp` names a reason to stop waiting (the process exited).
 */
export async function untilHealthy(
  baseURL: string,
  {
    readyTimeoutMs,
    pollMs,
    gaveUp,
    probe = HEALTH,
  }: { readyTimeoutMs: number; pollMs: number; gaveUp?: () => Promise<string | undefined>; probe?: HealthProbe },
): Promise<void> {
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    const stop = await gaveUp?.();
    if (stop !== undefined) throw new Error(stop);
    const problem = await healthProblem(baseURL, Math.max(pollMs, 1000), probe);
    if (problem === "") return;
    if (Date.now() > deadline) throw new Error(`the server at ${baseURL} did not answer ${probe.path} in ${readyTimeoutMs} ms: ${problem}`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/** A JSON answer, or an error naming the path and the server's own message. */
export async function jsonOf(url: string, method: "GET" | "POST", body?: unknown, timeoutMs?: number): Promise<unknown> {
  const response = await send(url, method, body, undefined, timeoutMs);
  const text = await textOf(response);
  if (response.status !== 200) throw new Error(`${method} ${url} answered ${response.status}: ${text}`);
  return JSON.parse(text) as unknown;
}

/**
 * The payload of each server-sent event as it arrives: the `data:` lines of one event joined
 * (llama-server also writes `error:` lines); comments and empty events are skipped.
 */
export async function* sseEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const chunk of body) {
    buffered += decoder.decode(chunk, { stream: true });
    let boundary = buffered.indexOf("\n\n");
    while (boundary >= 0) {
      const block = buffered.slice(0, boundary);
      buffered = buffered.slice(boundary + 2);
      boundary = buffered.indexOf("\n\n");
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:") || line.startsWith("error:"))
        .map((line) => line.slice(line.indexOf(":") + 1).trim())
        .join("");
      if (data !== "") yield data;
    }
  }
}
