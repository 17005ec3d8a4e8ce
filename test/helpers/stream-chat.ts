// A streaming chat request as a client sees it: content before the end, and how it ended.
import { TINY_MODEL, type TestServer } from "./server.js";

/** What a streaming client saw: content tokens before the end, and how the stream ended. */
export interface StreamSeen {
  status: number;
  contentChunks: number;
  completionTokens?: number;
  error?: { code: string; message: string };
}

export async function streamChat(server: TestServer, content: string, maxTokens: number, headers: Record<string, string> = {}): Promise<StreamSeen> {
  const response = await fetch(`${server.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({
      model: TINY_MODEL,
      messages: [{ role: "user", content }],
      max_tokens: maxTokens,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  const seen: StreamSeen = { status: response.status, contentChunks: 0 };
  if (response.status !== 200) {
    seen.error = ((await response.json()) as { error: { code: string; message: string } }).error;
    return seen;
  }
  for (const line of (await response.text()).split("\n")) {
    if (!line.startsWith("data: {")) continue;
    const event = JSON.parse(line.slice(6)) as {
      error?: { code: string; message: string };
      choices?: { delta: { content?: string } }[];
      usage?: { completion_tokens: number };
    };
    if (event.error) seen.error = event.error;
    if (event.choices?.[0]?.delta.content) seen.contentChunks++;
    if (event.usage) seen.completionTokens = event.usage.completion_tokens;
  }
  return seen;
}
