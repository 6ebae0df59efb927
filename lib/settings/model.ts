import { z } from "zod";
import { byteSize, duration, finiteDuration, modelId, slotName, timeout } from "./fields.ts";

/** The most aliases one model may have. */
export const maxAliases = 100;

/**
 * How one model moves along the tier ladder. Every field is optional here: a
 * model's value wins over the file's `defaults:`, which wins over
 * `builtinTierDefaults`. The same object is a Model's spec on Kubernetes and,
 * in kebab-case, the `snooze.dev/*` annotations of a workload.
 */
export const tierSettings = z.strictObject({
  aliases: z
    .array(modelId)
    // A bound, so a Model or a workload's annotation cannot make the webhooks (one event loop, a
    // deadline the apiserver keeps) and the activator's routes work on an unbounded list.
    .max(maxAliases, { message: `may list at most ${maxAliases} aliases` })
    // The same alias twice is a slip; Kubernetes refuses it too (a list of type set).
    .superRefine((aliases, ctx) => {
      const seen = new Set<string>();
      for (const [index, alias] of aliases.entries())
        if (seen.size === seen.add(alias).size)
          ctx.addIssue({
            code: "custom",
            path: [index],
            input: alias,
            message: "is listed twice; ids and aliases must be unique",
            // Said after the value: `"q" is listed twice`.
            params: { valueFirst: true },
          });
    })
    .optional()
    .meta({
      description: "Other ids that clients may use for this model (at most 100).",
      "x-kubernetes-list-type": "set",
    }),
  sleep: z.boolean().optional().meta({
    description: "Whether the engine supports vLLM sleep mode; without it a replica only goes ready ↔ cold.",
  }),
  sleepAfter: duration.optional().meta({
    description:
      "Idle time after which a ready replica is drained and put to sleep (or stopped when sleep is off).",
  }),
  sleepLevel: z
    .union([z.literal(1), z.literal(2)])
    .optional()
    .meta({
      description: "vLLM sleep level on idle: 1 keeps weights in host RAM (fast wake), 2 drops them.",
    }),
  deepSleepAfter: duration.optional().meta({
    description:
      "Time asleep at level 1 after which the replica goes to level 2; a slot's member is stopped instead (the move wakes the engine, and its accelerator may hold another member by then).",
  }),
  zeroAfter: duration
    .optional()
    .meta({ description: "Time asleep after which the engine is stopped (scale to zero)." }),
  wakeTarget: finiteDuration("a wake target of never would let every sleep level through", { positive: true })
    .optional()
    .meta({
      description:
        "Learn the ladder: from this model's measured sleep and wake times and its idle gaps, choose when to sleep and at which level (or stop) to spend the fewest awake GPU-seconds while wakes stay within this target (for 95% of idle gaps, or as often as the fixed ladder manages). `sleepAfter`, `sleepLevel`, `sleep` and `deepSleepAfter` set explicitly are kept. Unset: the fixed ladder.",
    }),
  prewarmBudget: finiteDuration("a budget must be a duration; 0 turns prewarm off", {
    atMost: { ms: 86_400_000, message: "is more than a day: the budget is extra awake time per day" },
  })
    .optional()
    .meta({
      description:
        "Extra awake time per day (UTC) this model may spend on prewarms: waking it (or keeping it awake) shortly before a request is likely, as learned from its own arrival history by time of week. A prewarm never evicts a busy slot resident and yields to real demand. 0 turns learned prewarm off; a `dev.snooze.model.prewarm` event's `for` is kept within it too.",
    }),
  holdBudget: finiteDuration("a held request must get an answer, a 503 at the latest").optional().meta({
    description:
      "How long a request may wait for its model before a 503; the generation timeout starts only at dispatch.",
  }),
  queueDepth: z
    .int()
    .min(1)
    .max(1_000_000)
    .optional()
    .meta({ description: "How many requests may be held for this model at once." }),
  concurrency: z
    .int()
    .min(0)
    .max(100_000)
    .optional()
    .meta({ description: "In-flight requests per replica; 0 means unlimited." }),
  maxConnections: z.int().min(1).max(100_000).optional().meta({
    description:
      "Connections the activator opens to one replica at most (with `concurrency`, the smaller of the two); requests beyond it wait in the hold queue, within the hold budget.",
  }),
  connectTimeout: timeout.optional().meta({
    description:
      "How long connecting to an engine may take; past it the replica is re-checked and the request sent to whatever becomes ready, else a 504 `upstream_connect_timeout`. `never` turns it off.",
  }),
  firstByteTimeout: timeout.optional().meta({
    description:
      "How long the engine may take, from dispatch, to start its answer (a long prompt's prefill counts); past it a 504 `upstream_timeout`, with `x-should-retry: false` (the engine may still be generating it). `never` turns it off.",
  }),
  idleTimeout: timeout.optional().meta({
    description:
      "How long an answer under way may go without a byte from the engine; past it a stream ends with an SSE error event (`upstream_idle_timeout`), any other answer is cut off. Also how long a client may take none of the answer (it stopped reading): its request then ends and its connection is closed. `never` turns both off.",
  }),
  warmup: z.boolean().optional().meta({
    description:
      "Send a 1-token request after every start and wake, before routing traffic. Locally it carries the key of an engine whose command has `--api-key` (in any spelling vLLM reads: `--api_key k`, `--api-k=k`) or whose environment `VLLM_API_KEY`. One Snooze cannot make (out of file descriptors), or one the engine answers 401 (a key Snooze cannot see, or on Kubernetes: clients send theirs), is skipped and the engine routed.",
  }),
  streamProgress: z.boolean().optional().meta({
    description:
      'While a streaming request is held past 1 s, answer 200 at once and send SSE comment lines (`: waking qwen, ~2s`); a failure then arrives as an SSE error event instead of a 503. Only on routes vLLM streams (chat, completions, responses, audio transcriptions and translations): embeddings, score and rerank answer JSON whatever `stream` says. A streaming request is one whose `stream` vLLM reads as true: `true`, and as pydantic reads booleans, `1`, `"true"`, `"yes"`, `"on"` in any case. The early head names the request in `x-request-id` (the client\'s own `X-Request-Id`, else the body\'s `request_id`, else a fresh id), which the engine is sent too.',
  }),
  startTimeout: finiteDuration("a start that hangs must fail, so held requests hear why", {
    positive: true,
  })
    .optional()
    .meta({
      description:
        "How long a cold start, with its warm-up, may take before it is declared failed; sooner when the engine stops answering `/health` during its warm-up (two checks in a row, 5 s each), and at once when the engine cannot start (locally: it cannot be spawned or exits; on Kubernetes: its pod waits with `ImagePullBackOff`, `CrashLoopBackOff` and the like, a slot member's crash excepted).",
    }),
  wakeTimeout: finiteDuration("a wake that hangs must fail, so held requests hear why", {
    positive: true,
  })
    .optional()
    .meta({
      description:
        "How long a wake, with its warm-up, may take before it is declared failed; an engine's sleep call gets as long (at least 30 s), past which the engine is stopped instead; sooner when it stops answering `/health` during the wake, the warm-up or the sleep call (two checks in a row, 5 s each).",
    }),
  drainTimeout: finiteDuration("a request that never ends would keep the replica awake").optional().meta({
    description:
      "How long in-flight requests may run after a replica stops taking new ones; those still running then are ended (503 or an SSE error event `drain_timeout`) and it sleeps or stops.",
  }),
  hostMemory: byteSize.optional().meta({
    description:
      "Host RAM this model's weights take while asleep at level 1 (counts against hostMemoryBudget).",
  }),
  slot: slotName.optional().meta({
    description:
      "The slot (one exclusive accelerator) this model shares with others. In snooze.yaml, one defined under `slots:`; on Kubernetes, a `Slot` object of that name in the Model's namespace sets its policy, else the defaults apply.",
  }),
  priority: z
    .int()
    .min(-1000)
    .max(1000)
    .optional()
    .meta({ description: "Priority within the slot; higher wins." }),
});

export type TierSettingsInput = z.input<typeof tierSettings>;
export type TierSettings = z.output<typeof tierSettings>;

/** Built-in values for every tier setting; times in ms, sizes in bytes. */
export const builtinTierDefaults = {
  aliases: [] as string[],
  sleep: true,
  sleepAfter: 5 * 60_000,
  sleepLevel: 1 as 1 | 2,
  deepSleepAfter: 30 * 60_000,
  zeroAfter: 2 * 3_600_000,
  wakeTarget: undefined as number | undefined,
  prewarmBudget: 0,
  holdBudget: 300_000,
  queueDepth: 1_000,
  concurrency: 0,
  maxConnections: 1_024,
  connectTimeout: 5_000,
  firstByteTimeout: 10 * 60_000,
  idleTimeout: 5 * 60_000,
  warmup: true,
  streamProgress: false,
  startTimeout: 10 * 60_000,
  wakeTimeout: 2 * 60_000,
  drainTimeout: 60_000,
  hostMemory: 0,
  slot: undefined as string | undefined,
  priority: 0,
};

export type ResolvedTierSettings = typeof builtinTierDefaults;

/** A model in snooze.yaml: how to run its engine, plus its tier settings. */
export const localModel = tierSettings.extend({
  command: z.array(z.string()).min(1).meta({
    description:
      "The engine's argv, the program first (it may not be empty); ${PORT}, ${HOST} and ${MODEL} are substituted, and an argument ${SNOOZE} runs this Snooze (for `${SNOOZE} sim`).",
  }),
  env: z.record(z.string(), z.string()).optional().meta({
    description:
      "Extra environment for the engine process; ${PORT}, ${HOST} and ${MODEL} are substituted in its values.",
  }),
  port: z.int().min(1).max(65_535).optional().meta({
    description:
      "A fixed port for the engine; when absent a free one is chosen below the kernel's ephemeral range, so the machine's outgoing connections cannot take it before the engine binds it, and never another model's fixed port nor the port of another engine Snooze runs (one still loading does not listen on it yet). A start fails, saying so, when another process already listens on a fixed port; choose a fixed port below the ephemeral range (32768–60999 by default, `/proc/sys/net/ipv4/ip_local_port_range`), where any outgoing connection of the machine may take it first.",
  }),
});

export type LocalModelInput = z.input<typeof localModel>;
