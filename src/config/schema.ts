// The schema of config.yml: one TypeBox schema gives the types, the defaults and the
// validation (with key paths in the errors). Every object is closed
// (`additionalProperties: false`) so a misspelt key stops start-up instead of being ignored.
import { Type, type Static } from "@sinclair/typebox";

const closed = { additionalProperties: false } as const;

export const ModelConfigSchema = Type.Object(
  {
    id: Type.String({
      minLength: 1,
      pattern: "^[A-Za-z0-9._:/-]+$",
      description: "The name clients send as `model` and see in GET /v1/models.",
    }),
    source: Type.String({
      minLength: 1,
      description:
        "`preset:<name>` (a model the project generates: tiny, bench), a path to a .gguf file " +
        "(relative to config.yml), or an `hf:<user>/<repo>:<quant>` URI fetched on first start.",
    }),
    workers: Type.Union([Type.Integer({ minimum: 1, maximum: 64 }), Type.Literal("auto")], {
      default: "auto",
      description: "Workers (one llama.cpp context each) serving this model; auto = one per GPU found (pinned to it), or 2 on CPU.",
    }),
    slots: Type.Integer({ minimum: 1, maximum: 256, default: 4, description: "Sequences (KV slots) per worker." }),
    contextSize: Type.Integer({ minimum: 64, maximum: 1048576, default: 4096, description: "Tokens per slot." }),
    batchSize: Type.Integer({ minimum: 1, maximum: 65536, default: 512, description: "Tokens llama.cpp evaluates in one batch." }),
    threads: Type.Integer({
      minimum: 1,
      maximum: 256,
      default: 1,
      description: "llama.cpp CPU threads per worker. Never leave it to llama.cpp on small machines: its default oversubscribes a 2-core box (measured 500x slower).",
    }),
    flashAttention: Type.Union([Type.Literal("auto"), Type.Boolean()], {
      default: "auto",
      description: "llama.cpp flash attention: auto (llama.cpp decides per device, as llama-server does), true, false.",
    }),
    gpu: Type.Union([Type.Literal(false), Type.Literal("auto"), Type.Literal("cuda"), Type.Literal("vulkan"), Type.Literal("metal")], {
      default: false,
      description: "llama.cpp backend: false (CPU), auto, cuda, vulkan, metal.",
    }),
    seed: Type.Integer({ minimum: 0, default: 1, description: "Seed of a generated `preset:` model." }),
    isolation: Type.Union([Type.Literal("auto"), Type.Literal("thread"), Type.Literal("process")], {
      default: "auto",
      description: "thread: a worker thread in the host; process: a child process per worker (a native abort ends only that worker); auto: process when several GPUs are found, else thread.",
    }),
  },
  closed,
);

export const ConfigSchema = Type.Object(
  {
    server: Type.Object(
      {
        host: Type.String({ default: "127.0.0.1", description: "Listen address (env HOST overrides)." }),
        port: Type.Integer({ minimum: 0, maximum: 65535, default: 8080, description: "Listen port (env PORT overrides; 0 = any free port)." }),
        bodyLimitBytes: Type.Integer({ minimum: 1024, default: 8 * 1024 * 1024, description: "Largest request body accepted." }),
        maxJsonDepth: Type.Integer({
          minimum: 8,
          maximum: 512,
          default: 64,
          description: "Deepest nesting of arrays and objects a JSON body may have; checked before the body is parsed (400 json_too_deep above it).",
        }),
        maxIdLength: Type.Integer({
          minimum: 16,
          maximum: 8192,
          default: 256,
          description: "Longest client id accepted: `user`, `model`, the x-session-id, x-request-id and x-radixgate-worker headers and a path segment such as a model id (400, or 414 for the path, above it).",
        }),
        apiKeys: Type.Array(Type.String({ minLength: 1 }), {
          default: [],
          description: "Bearer keys clients must send (Authorization: Bearer <key>); empty = no authentication. Env RADIXGATE_API_KEYS (comma-separated) adds keys.",
        }),
        maxConcurrentRequests: Type.Integer({ minimum: 1, default: 1024, description: "Requests the server holds at once (tokenizing, queued, running); beyond it, 429 with Retry-After." }),
        shutdownTimeoutMs: Type.Integer({ minimum: 0, default: 30_000, description: "On SIGTERM, in-flight requests get this long to finish before they are cancelled." }),
        logLevel: Type.Union(
          ["fatal", "error", "warn", "info", "debug", "trace", "silent"].map((level) => Type.Literal(level)),
          { default: "info" },
        ),
      },
      { ...closed, default: {} },
    ),
    models: Type.Array(ModelConfigSchema, { minItems: 1, description: "The models this box serves, each on its own workers." }),
    scheduler: Type.Object(
      {
        policy: Type.String({
          default: "preble",
          description: "Placement policy by name (env RADIXGATE_POLICY overrides): preble, shape, cache-aware, roundrobin, affinity, least-load.",
        }),
        windowMs: Type.Integer({ minimum: 1000, default: 180_000, description: "Load and statistics window H, ms (Preble: 3 minutes)." }),
        sessionPinning: Type.Boolean({ default: true, description: "Stick requests with x-session-id (or `user`) to the worker that served the session." }),
        sessionTtlMs: Type.Integer({ minimum: 1000, default: 1_800_000, description: "A session is forgotten after this long idle." }),
        maxSessions: Type.Integer({ minimum: 1, default: 100_000, description: "Sessions remembered at most; a new one beyond it evicts the least recently seen." }),
        sessionOverloadPerSlot: Type.Number({ exclusiveMinimum: 0, default: 2, description: "A session leaves its worker when it has this many requests in flight per slot." }),
        maxQueuePerWorker: Type.Integer({ minimum: 0, default: 64, description: "Requests a worker may hold waiting beyond its slots; while a worker is down, the live workers of its model share its places. When every worker of a model is full, new requests get 429." }),
        preble: Type.Object(
          {
            rebalanceRatio: Type.Number({ minimum: 1, default: 1.5, description: "Exploit yields to the cheapest worker when the holder's load >= this x the lightest." }),
            historyPerWorker: Type.Integer({ minimum: 0, default: 50, description: "Placements per worker in the window before rebalancing starts." }),
            hotTtftRatio: Type.Number({ minimum: 1, default: 2, description: "A prefix is hot when its TTFT in the second half of the window >= this x the first half." }),
            hotMinSamples: Type.Integer({ minimum: 1, default: 3, description: "TTFT samples needed in each half before a prefix can be hot." }),
          },
          { ...closed, default: {} },
        ),
        local: Type.Object(
          {
            priorityGroups: Type.Integer({ minimum: 1, maximum: 100, default: 10, description: "P: a worker's waiting requests split into this many groups by hit ratio (Preble: 10)." }),
            quotaPerGroup: Type.Integer({ minimum: 1, maximum: 10_000, default: 10, description: "k: one pass admits up to (group + 1) x k requests of a group (Preble: 10)." }),
            chunkTokens: Type.Integer({ minimum: 1, maximum: 1_048_576, default: 1024, description: "Prefill tokens per batch, shared by prefilling requests after every decoding one got its token (Preble: 1024)." }),
            hitRatioWindowMs: Type.Integer({ minimum: 0, default: 180_000, description: "A spilled state counts toward a waiting request's hit ratio only if used within this window (slots always count)." }),
          },
          { ...closed, default: {} },
        ),
        cacheAware: Type.Object(
          {
            balanceAbsThreshold: Type.Number({ minimum: 0, default: 64, description: "SGLang: imbalance when max - min in-flight exceeds this..." }),
            balanceRelThreshold: Type.Number({ minimum: 1, default: 1.5, description: "...and max > this x min." }),
            cacheThreshold: Type.Number({ minimum: 0, maximum: 1, default: 0.3, description: "SGLang: route to the longest match when matched / input exceeds this." }),
          },
          { ...closed, default: {} },
        ),
      },
      { ...closed, default: {} },
    ),
    spill: Type.Object(
      {
        budgetBytes: Type.Integer({ minimum: 0, default: 512 * 1024 * 1024, description: "Bytes of spilled KV states each worker keeps in host memory (0 = never spill)." }),
        minTokens: Type.Integer({ minimum: 1, default: 64, description: "Only an evicted part of at least this many tokens is saved." }),
        recentMs: Type.Integer({ minimum: 0, default: 600_000, description: "Only slot content used within this many ms is saved." }),
        dir: Type.String({ default: "", description: "Folder for state files; empty = /dev/shm where it exists, else the OS temp folder." }),
      },
      { ...closed, default: {} },
    ),
    prompt: Type.Object(
      {
        threads: Type.Integer({ minimum: 1, maximum: 64, default: 1, description: "Threads that render chat templates and tokenize, off the event loop." }),
      },
      { ...closed, default: {} },
    ),
    generation: Type.Object(
      {
        defaultMaxTokens: Type.Integer({ minimum: 1, default: 256, description: "Completion tokens when a request sets no max_tokens." }),
        requestTimeoutMs: Type.Integer({ minimum: 0, default: 600_000, description: "A request still running after this long is cancelled and answered 504 (0 = no deadline)." }),
      },
      { ...closed, default: {} },
    ),
  },
  closed,
);

export type Config = Static<typeof ConfigSchema>;
export type ModelConfig = Static<typeof ModelConfigSchema>;
