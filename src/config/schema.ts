// The schema of config.yml: one TypeBox schema gives the types, the defaults and the
// validation (with key paths in the errors), assembled from the settings each part declares.
// Every object is closed, so a misspelt key stops start-up instead of being ignored.
import { Type, type Static } from "@sinclair/typebox";
import { GenerationSettingsSchema } from "../common/generation-settings.js";
import { DEFAULT_THREAD_POLL } from "../engine/wire/protocol.js";
import { CLOSED, live, liveKeys, SETTINGS_OBJECT } from "../common/settings-schema.js";
import { GlobalSchedulerSettingsSchema } from "../scheduler/global-scheduler-settings.js";
import { LocalSchedulerSettingsSchema } from "../scheduler/local-scheduler-settings.js";
import { POLICY_SETTINGS_SCHEMAS, PolicyNameSchema } from "../scheduler/registry.js";

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
    workers: Type.Union([Type.Integer({ minimum: 0, maximum: 64 }), Type.Literal("auto")], {
      default: "auto",
      description:
        "Local workers (one llama.cpp context each) serving this model; auto = one per GPU found (pinned to it), or 2 on CPU. 0 = only the remote engines serve it.",
    }),
    slots: Type.Integer({ minimum: 1, maximum: 256, default: 4, description: "Sequences (KV slots) per worker." }),
    contextSize: Type.Integer({ minimum: 64, maximum: 1048576, default: 4096, description: "Tokens per slot." }),
    batchSize: Type.Integer({ minimum: 1, maximum: 65536, default: 512, description: "Tokens llama.cpp evaluates in one batch." }),
    threads: Type.Integer({
      minimum: 1,
      maximum: 256,
      default: 1,
      description:
        "llama.cpp CPU threads per worker. Never leave it to llama.cpp on small machines: its default oversubscribes a 2-core box (measured 500x slower).",
    }),
    threadPoll: Type.Integer({
      minimum: 0,
      maximum: 100,
      default: DEFAULT_THREAD_POLL,
      description:
        "How hard llama.cpp's compute threads spin for the next decode step before they sleep, as llama-server's --poll: 0 = sleep at once (leaves the cores to other processes between steps), 100 = longest. Applies with threads above 1; polling decoded no faster on a 2-core box, and at 50 spun a core for about 160 ms after every request (a scratch measurement, docs/engine.md).",
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
    engine: Type.Union([Type.Literal("node-llama-cpp"), Type.Literal("llama-server")], {
      default: "node-llama-cpp",
      description:
        "What evaluates the model: node-llama-cpp (embedded, in a thread or child process per worker) or llama-server (llama.cpp's own server, one process per worker started by Radixgate; build it once with `npm run build:llama-server`).",
    }),
    llamaServer: Type.Object(
      {
        binary: Type.String({
          default: "",
          description:
            "The llama-server binary of `engine: llama-server`; empty = the build `npm run build:llama-server` made from node-llama-cpp's bundled llama.cpp.",
        }),
        cacheRamMiB: Type.Integer({
          minimum: -1,
          default: 8192,
          description:
            "llama-server's prompt cache in RAM per worker, MiB (--cache-ram; 0 = off, -1 = no limit). On, a request can find more cached than the placement tree knows; off, the tree is exact.",
        }),
        args: Type.Array(Type.String(), { default: [], description: 'More llama-server arguments, after Radixgate\'s own (e.g. ["--mlock"]).' }),
      },
      SETTINGS_OBJECT,
    ),
    remote: Type.Array(
      Type.Object(
        {
          kind: Type.Union([Type.Literal("llama-server"), Type.Literal("radixgate"), Type.Literal("openai")], {
            description:
              "What runs there: llama-server (llama.cpp's server), radixgate (another Radixgate host, which places on its own workers), or openai (any OpenAI-compatible server taking token ids on /v1/completions: vLLM, SGLang, ...).",
          }),
          url: Type.String({
            pattern: "^https?://[^\\s/]+(/.*)?$",
            description: "Its base URL, e.g. http://10.0.0.7:8080 (the server's /health is under it).",
          }),
          model: Type.Optional(Type.String({ minLength: 1, description: "radixgate and openai: the model's name on that server; default: this model's id." })),
          apiKey: Type.Optional(
            Type.String({ minLength: 1, description: "radixgate and openai: an API key of that server, when it wants one (sent as a bearer token)." }),
          ),
          slots: Type.Optional(
            Type.Integer({
              minimum: 1,
              maximum: 4096,
              description: "openai only: requests it runs at once as far as this router counts (more wait here); default: this model's slots.",
            }),
          ),
          cacheTtlS: Type.Optional(
            Type.Integer({
              minimum: 1,
              description: "openai only: a prompt not asked for in this long is taken as evicted from its cache (the tree forgets it); default 300.",
            }),
          ),
          discover: Type.Optional(
            Type.Literal("dns", {
              description:
                "dns: the URL's host name stands for every address it resolves to (a Kubernetes headless service: its pods), one worker each, resolved again every discoverEveryS: new addresses join, vanished ones leave.",
            }),
          ),
          discoverEveryS: Type.Optional(Type.Integer({ minimum: 1, description: "With discover: dns, seconds between resolutions (default 30)." })),
          firstByteTimeoutS: Type.Optional(
            Type.Integer({
              minimum: 0,
              description:
                "Seconds a generation waits for the first byte of the engine's answer (connecting included; its queue and prefill count: llama-server sends nothing before the first token); past it the connection is closed, which drops the request there, and the request is placed on another engine (504 engine_timeout when none can take it). Default 60; 0 = wait as long as it takes.",
            }),
          ),
        },
        CLOSED,
      ),
      {
        default: [],
        description:
          "Engines elsewhere that serve this model too, each one more worker (after the local ones). They must load the same GGUF as `source` (checked at start). A llama-server is best started with --slots --metrics --slot-save-path DIR; a Radixgate host counts as one worker with all of its slots, and its event stream keeps this host's tree exact.",
      },
    ),
    isolation: Type.Union([Type.Literal("auto"), Type.Literal("thread"), Type.Literal("process")], {
      default: "auto",
      description:
        "thread: a worker thread in the host; process: a child process per worker (a native abort ends only that worker); auto: process when several GPUs are found, else thread.",
    }),
  },
  CLOSED,
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
          description:
            "Longest client id accepted: `user`, `model`, the x-session-id, x-request-id and x-radixgate-worker headers and a path segment such as a model id (400, or 414 for the path, above it).",
        }),
        apiKeys: live(
          Type.Array(Type.String({ minLength: 1 }), {
            default: [],
            description:
              "Bearer keys clients must send (Authorization: Bearer <key>); empty = no authentication. Env RADIXGATE_API_KEYS (comma-separated) adds keys.",
          }),
        ),
        maxConcurrentRequests: Type.Integer({
          minimum: 1,
          default: 1024,
          description: "Requests the server holds at once (tokenizing, queued, running); beyond it, 429 with Retry-After.",
        }),
        shutdownTimeoutMs: Type.Integer({
          minimum: 0,
          default: 30_000,
          description: "On SIGTERM, in-flight requests get this long to finish before they are cancelled.",
        }),
        logLevel: Type.Union(
          ["fatal", "error", "warn", "info", "debug", "trace", "silent"].map((level) => Type.Literal(level)),
          { default: "info" },
        ),
        logFormat: Type.Union([Type.Literal("auto"), Type.Literal("json"), Type.Literal("pretty")], {
          default: "auto",
          description: "auto: readable coloured lines when stdout is a terminal, JSON lines otherwise; json; pretty (no colour off a terminal).",
        }),
      },
      SETTINGS_OBJECT,
    ),
    models: Type.Array(ModelConfigSchema, { minItems: 1, description: "The models this box serves, each on its own workers." }),
    // Each part of the scheduler declares its own settings: the registry, the global and the local scheduler.
    scheduler: Type.Object(
      {
        policy: PolicyNameSchema,
        ...GlobalSchedulerSettingsSchema.properties,
        preble: POLICY_SETTINGS_SCHEMAS.preble,
        local: LocalSchedulerSettingsSchema,
        cacheAware: POLICY_SETTINGS_SCHEMAS.cacheAware,
        dynamo: POLICY_SETTINGS_SCHEMAS.dynamo,
        llmD: POLICY_SETTINGS_SCHEMAS.llmD,
        sessionStore: Type.String({
          default: "",
          pattern: "^(|rediss?://.+)$",
          description:
            "A Redis that several routers in front of the same remote engines share sessions through (redis://[:password@]host:port[/db]): a session's next request goes to the engine that served it last, whichever router placed it. Empty = off (each router keeps its own).",
        }),
      },
      SETTINGS_OBJECT,
    ),
    spill: Type.Object(
      {
        budgetBytes: Type.Integer({
          minimum: 0,
          // llama-server's own default for its prompt cache in RAM (--cache-ram 8192 MiB).
          default: 8 * 1024 * 1024 * 1024,
          description:
            "Bytes of spilled KV states each worker keeps in host memory (0 = never spill); at most half the state folder's size, shared by the host's workers.",
        }),
        minTokens: Type.Integer({ minimum: 1, default: 64, description: "Only an evicted part of at least this many tokens is saved." }),
        recentMs: Type.Integer({ minimum: 0, default: 600_000, description: "Only slot content used within this many ms is saved." }),
        dir: Type.String({ default: "", description: "Folder for state files; empty = /dev/shm where it exists, else the OS temp folder." }),
      },
      SETTINGS_OBJECT,
    ),
    prompt: Type.Object(
      {
        threads: Type.Integer({ minimum: 1, maximum: 64, default: 1, description: "Threads that render chat templates and tokenize, off the event loop." }),
      },
      SETTINGS_OBJECT,
    ),
    generation: GenerationSettingsSchema,
  },
  CLOSED,
);

export type Config = Static<typeof ConfigSchema>;
export type ModelConfig = Static<typeof ModelConfigSchema>;

/** Config paths a reload applies at once (the nodes marked live); any other change waits for a restart. */
export const LIVE_KEYS: readonly string[] = liveKeys(ConfigSchema);
