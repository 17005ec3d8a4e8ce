// Server-sent events as a benchmark client reads them: the payload of each `data: ` event
// of an OpenAI-style stream, `[DONE]` included, as the bytes arrive.
export async function* sseData(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const bytes of body) {
    buffered += decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const event = buffered.slice(0, end).trim();
      buffered = buffered.slice(end + 2);
      if (event.startsWith("data: ")) yield event.slice(6);
    }
  }
}
