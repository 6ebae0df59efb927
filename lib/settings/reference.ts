import type { z } from "zod";
import { formatDuration } from "../duration.ts";
import { annotationFor } from "./annotations.ts";
import { snoozeFile } from "./file.ts";
import { maxAliasCount, maxConfigBytes, oversizeRefusal, parseConfig } from "./load.ts";
import { builtinTierDefaults, localModel, tierSettings } from "./model.ts";
import { maxNesting } from "./nesting.ts";
import { builtinSlotDefaults, slotSettings } from "./slot.ts";

/**
 * The configuration reference (docs/configuration.md), written from the schema
 * itself so the docs can never drift from what the code accepts.
 */
export function configurationReference(): string {
  const describe = (schema: z.ZodType) =>
    String((schema.meta() as { description?: string } | undefined)?.description ?? "");
  const show = (value: unknown) => {
    if (value === undefined) return "—";
    if (value === Number.POSITIVE_INFINITY) return "`never`";
    if (Array.isArray(value)) return value.length ? `\`${JSON.stringify(value)}\`` : "`[]`";
    return `\`${String(value)}\``;
  };
  // A duration's schema takes "5m" and refuses "5 min" (a size or a count takes neither).
  const isDuration = (schema: unknown) =>
    (schema as z.ZodType).safeParse("5m").success && !(schema as z.ZodType).safeParse("5 min").success;
  // Built-in durations are in ms: shown as a file writes them.
  const builtin = (schema: unknown, value: unknown) =>
    isDuration(schema) && typeof value === "number" && value > 0 && Number.isFinite(value)
      ? `\`${formatDuration(value)}\``
      : show(value);
  const tierRows = Object.entries(tierSettings.shape).map(([key, schema]) => {
    const fallback = builtin(schema, builtinTierDefaults[key as keyof typeof builtinTierDefaults]);
    return `| \`${key}\` | \`${annotationFor(key as keyof typeof tierSettings.shape)}\` | ${fallback} | ${describe(schema)} |`;
  });
  const engineRows = (["command", "env", "port"] as const).map(
    (key) => `| \`${key}\` | ${describe(localModel.shape[key])} |`,
  );
  const slotRows = Object.entries(slotSettings.shape).map(([key, schema]) => {
    const fallback = builtin(schema, builtinSlotDefaults[key as keyof typeof builtinSlotDefaults]);
    return `| \`${key}\` | ${fallback} | ${describe(schema)} |`;
  });
  const topDefaults = {
    hostMemoryBudget: "unlimited",
    maxBodySize: "`32Mi`",
    maxHeldBytes: "`256Mi`",
    bodyTimeout: "`10s`",
    eventSink: "`$K_SINK`, else none",
    eventMode: "`binary`",
  };
  const topRows = (
    ["hostMemoryBudget", "maxBodySize", "maxHeldBytes", "bodyTimeout", "eventSink", "eventMode"] as const
  ).map((key) => `| \`${key}\` | ${topDefaults[key]} | ${describe(snoozeFile.shape[key])} |`);
  // Which durations take `never`, read from the schema itself.
  const durations = [
    ...Object.entries(tierSettings.shape).map(([key, schema]) => [key, schema] as const),
    ...Object.entries(slotSettings.shape).map(([key, schema]) => [`slot ${key}`, schema] as const),
  ].filter(([, schema]) => isDuration(schema));
  const takesNever = (schema: unknown) => (schema as z.ZodType).safeParse("never").success;
  const list = (keys: string[]) => keys.map((k) => k.replace(/^(slot )?(.*)$/, "$1`$2`")).join(", ");
  const neverList = list(durations.filter(([, s]) => takesNever(s)).map(([k]) => k));
  const finiteList = list(durations.filter(([, s]) => !takesNever(s)).map(([k]) => k));
  const zeroList = list(
    durations.filter(([, s]) => !(s as z.ZodType).safeParse("0").success).map(([k]) => k),
  );
  return `# Configuration reference

<!-- Generated from lib/settings/ by \`node_modules/.bin/node hack/gen-config-docs.ts\`; a test fails when it is stale. -->

One schema (zod, in \`lib/settings/\`) validates \`snooze.yaml\`, the \`snooze.dev/*\` annotations of
Kubernetes workloads and the \`Model\`/\`Slot\` resources. YAML keys are camelCase; annotations are the
same settings in kebab-case under \`snooze.dev/\`. Durations are written \`250ms\`, \`30s\`, \`5m\`,
\`1h30m\`, \`0\`, or \`never\`; sizes like Kubernetes quantities (\`512Mi\`, \`16Gi\`, \`2G\`, or bytes:
\`1048576\`): \`Ki\`, \`Mi\`, \`Gi\`, \`Ti\`, \`Pi\`, \`Ei\` are powers of 1024, \`k\`, \`M\`, \`G\`, \`T\`, \`P\`, \`E\`
powers of 1000 (\`K\` is not one), and \`1e9\` is 10^9 bytes. A fraction needs a unit (\`1.5Gi\`; it is
taken to the nearest byte), and no size may pass 2^53-1 bytes (just under \`8Pi\`). Quotes are not
needed: a YAML number is taken as written (\`sleepAfter: 0\`), so a duration without its unit (\`30\`)
is refused as one. Keys are names as written too: a model \`1.50:\` is \`1.50\` (not \`1.5\`), \`true:\` is \`true\`,
and so are the names in \`aliases\` and \`slot\` (\`slot: true\` names the slot \`true\`, \`aliases: [12]\` the alias \`12\`);
but a key \`null:\`, \`~:\` or none at all is YAML null, which names nothing: quote it (\`"null":\`) to use it
as a name. A key may be set once in a mapping, a merge key \`<<\` too (list what it merges: \`<<: [*a, *b]\`).
The file is read as YAML 1.2 (its core schema, which JSON's values fit): \`yes\`, \`no\`, \`on\` and \`off\` are text,
not true and false (\`sleep: yes\` is refused, saying to write \`true\`), and \`010\` is ten. A \`%YAML\` line asking
for another version is refused, with whatever else is wrong (\`%YAML 1.1\` would read those values otherwise,
so one line would change what the file means): remove it.
\`!!int\` and \`!!float\` take the number they tag, so \`!!float 5\` is 5, an integer, like \`5.0\`. YAML tags other than the
standard \`!!str\`, \`!!int\`, \`!!float\`, \`!!bool\`, \`!!null\`, \`!!map\`, \`!!seq\` (and \`!\`) are refused, as
are lists and mappings nested more than ${maxNesting} deep. Ids, aliases and slot names may not hold a
character that does not show: a control character or an invisible format character (Unicode Cf, such as
U+200B zero width space, U+200D zero width joiner or U+FEFF): \`qwen\` and \`qwen\` with a U+200B after it
would look like one name; nor a lone surrogate (an escape such as \`"\\ud800"\` without its pair), which is no
character and reaches an engine's command line as U+FFFD. Nor may an id or alias be \`.\` or \`..\`: clients put the name in URL paths
(\`/v1/models/{model}\`), where it would mean the folder itself or the one above. \`__proto__\` is refused as a model id, a slot name and an \`env\` name (in JavaScript objects it is the
object's prototype, not a key); as an alias it is taken, as are \`constructor\`, \`toString\` and the like anywhere. Models are listed (\`snooze status\`, \`/v1/models\`) in the order the file writes them, after a
reload too (a model added, or removed and added back, takes its place in the file, cold since it
was added).

Every duration arms a timer, so none may be longer than \`596h31m23.647s\` (2^31-1 ms, about 24.8 days:
the longest a timer waits). \`never\` is taken only where it means "this step does not happen" (${neverList}); a timeout
or budget that must end refuses it (${finiteList}). \`0\` is refused too by ${zeroList}
(for no timeout, write \`never\` where it is taken), and so is anything under \`1ms\` (\`0.4ms\`: a timer waits whole
milliseconds). \`maxBodySize\` and \`maxHeldBytes\` must be at least 1 byte. A duration or size is
written in at most 64 characters (the longest a timer waits takes 14); on Kubernetes the Model
and Slot CRDs refuse each of these ranges themselves ([Kubernetes](kubernetes.md)).
Two models may not share a fixed \`port\`, and none may take the port \`snooze serve\` listens on (its \`--port\`):
such a file stops \`snooze serve\` at start, and a reload that brings it is refused. Ids and aliases must be unique, and those of different models differ in
more than case and Unicode form: a \`Host\` header routes to a model in any case, and names equal in Unicode
NFKC look like one name (\`café\` written with \`é\` or with \`e\` and a combining accent, full-width \`ｑｗｅｎ\` and
\`qwen\`), so names are compared in NFKC with case ignored. One model may take \`qwen\` and \`Qwen\` both (or both
forms of \`café\`), as a request body names it either way. A request that names a model in the other
canonical form (NFD \`café\` against NFC in the file, or the other way round) reaches it, and its body
names the model to the engine as the file writes it. Slot names too must differ in more than case and Unicode form
(two slots are two accelerators, and names that look like one would let the members of both be resident at once on
one GPU); a model's \`slot\` that names a slot in another case or form is refused, saying how it is written. \`aliases\` name one model, so they are set per model,
not in \`defaults:\`; so are \`command\`, \`env\` and \`port\` (each model runs an engine of its own): in \`defaults:\`
they are refused, saying where they go and how to share one (an anchor under an \`x-\` key, below; a \`command\`
can write \`\${MODEL}\` for the model's id). A model's setting written at the top level is refused, saying to put it
under \`defaults:\` or under the model. A file that is not UTF-8 is refused, naming the line and column of its first bad byte.
Its lines may end in LF, CRLF or a bare CR (YAML 1.2's line breaks, as Unix, Windows and classic Mac OS save them).

Settings can be shared with YAML anchors and aliases (\`&name\`, \`*name\`) and merge keys (\`<<: *name\`, or
\`<<: [*a, *b]\`), which copy an anchored mapping's keys into a model, slot or \`defaults:\`; keys the mapping
writes itself win, then the earlier source. An alias names an anchor written before it, and may not sit
inside what it names (a mapping cannot merge itself). Top-level keys that start with \`x-\` are ignored, a
place for anchors (as in Docker Compose): what they hold is not read nor checked, except what an alias
elsewhere uses, which is checked where it is written (aliases in them must still name an anchor, and count
against the limit below):

\`\`\`yaml
x-rarely-used: &rarely-used
  sleepAfter: 2m
  deepSleepAfter: 10m
  zeroAfter: 1h
models:
  qwen:
    <<: *rarely-used
    command: [vllm, serve, Qwen/Qwen3-8B, --served-model-name, "\${MODEL}", --port, "\${PORT}", --enable-sleep-mode]
    zeroAfter: 4h      # wins over the anchor's
\`\`\`

Aliases and merge keys may expand at most ${maxAliasCount} times in all (the guard against alias bombs).

A bad file stops \`snooze serve\` with exit code 2 and one line per problem:
\`${durationProblem()}\`.
The file must be a regular file (or a link to one) of at most ${maxConfigBytes / 1024 / 1024} MiB, a Kubernetes ConfigMap's own limit
(a hundred models fit in some 20 KiB): a directory, a named pipe, a device such as \`/dev/zero\` or a larger
file (\`-c model.safetensors\`) is refused before it is read, the same way, saying what it is
(\`model.safetensors: (top level): ${oversizeRefusal(1.5 * 2 ** 30)}\`).
A valid file whose model writes a setting that never takes effect (\`sleepLevel\`, \`deepSleepAfter\`,
\`zeroAfter\` or \`wakeTimeout\` with \`sleep: false\`; \`deepSleepAfter\` with \`sleepLevel: 2\`, or at or
after its \`zeroAfter\`) loads, with a warning in the log naming each one the same way
(\`settings that never take effect\`); settings only inherited from \`defaults:\` are not named. So does a
\`command\` that serves the model under another name than its id, which requests (an alias is rewritten to
it) and the warm-up use: vLLM would answer them 404. vLLM serves the words after \`--served-model-name\`,
else the model it loads: \`vllm serve Qwen/Qwen3-8B\` for a model \`qwen\` needs \`--served-model-name "\${MODEL}"\`.
And so does a \`vllm serve\` without \`--enable-sleep-mode\` (nor a \`--config\` file that may set it) for a model
whose \`sleep\` is true: vLLM then serves no sleep endpoints, so each sleep would fail and stop the engine.
And so does a slot under \`slots:\` that no model names in \`slot:\` (most often a model's \`slot:\` was meant
to name it): its settings govern no model.

A running \`snooze serve\` reads the file again on SIGHUP, and whenever it changes with
\`--watch-config\`, and applies the difference without dropping a held or in-flight request: a changed
\`command\`, \`env\`, \`port\`, \`sleep\` or \`slot\` restarts that model's engine once it drained, and so
does a changed \`device\` of its slot; every other key applies to the running model. A bad file then changes nothing: the settings in use stay,
and the log names each problem the same way ([local mode](local-mode.md#reloading-the-settings)).

## The file

\`\`\`yaml
defaults: { ...tier settings for every model... }
hostMemoryBudget: 64Gi
models:
  <model id>:          # the OpenAI \`model\` clients send
    command: [...]     # how to run the engine
    ...tier settings...
slots:
  <slot name>: { ...slot settings... }
\`\`\`

| key | default | meaning |
| --- | --- | --- |
${topRows.join("\n")}

## Running an engine (local mode)

| key | meaning |
| --- | --- |
${engineRows.join("\n")}

\`command\` is a list, one word an item: Snooze runs it with no shell between. Written as one text
(\`command: "vllm serve m --port \${PORT}"\`) it is refused, with the list it meant (\`[vllm, serve, m, --port,
"\${PORT}"]\`; one that needs a shell's pipe, \`&&\`, redirection or variable, as \`[sh, -c, "…"]\`); a whole
line as its one item fails at start, its program not found, with the reason saying so. In a list (or
mapping) written in \`[ ]\` (\`{ }\`), an item holding \`\${…}\` is quoted (\`"\${PORT}"\`, \`"--port=\${PORT}"\`): YAML
reads its \`{\` as a mapping's start, and the file is refused, the error saying to quote it; a list
written one item a line (\`- \${PORT}\`) needs no quotes.

In \`command\` and in \`env\` values, \`\${PORT}\` is the port Snooze chose, \`\${HOST}\` is \`127.0.0.1\`, \`\${MODEL}\`
the model id; \`\${SNOOZE}\` is a command argument of its own. Any other \`\${…}\` is refused, so a typo such as
\`\${PROT}\` never reaches the engine: write \`$\${\` for a literal \`\${\` (\`sh -c "echo $\${HOME}"\` gives the shell
\`\${HOME}\`; \`$HOME\` without braces is passed on as written). Unless the model sets a fixed \`port\`, the
command or a value in \`env\` must hold \`\${PORT}\`. No argument, \`env\` name or value may hold a NUL character
(\`"\\0"\`: no process can be given one), and an \`env\` name may not be empty nor hold \`=\`. A start whose engine
cannot even be run (the system refuses its command, as for an argument list too long: E2BIG) fails as one whose
engine exits at once does: held requests get \`503 activation_failed\` with the reason, and the model's \`lastError\` says it.
Engines with \`sleep: true\` get \`VLLM_SERVER_DEV_MODE=1\` in their environment (vLLM serves its sleep
endpoints only with it, and only when started with \`--enable-sleep-mode\`). Every engine gets
\`PYTHONUNBUFFERED=1\` unless \`env\` (or Snooze's own environment) sets it: vLLM logs to its standard output,
which Python writes to a pipe only in 8 KiB blocks, so its lines would reach \`snooze logs\` late, and those
of an engine killed by a signal, its reason among them, never.

## Tier settings (per model, in \`defaults:\`, or as annotations)

A model's own value wins over \`defaults:\`, which wins over the built-in default.

| key | annotation | default | meaning |
| --- | --- | --- | --- |
${tierRows.join("\n")}

## Slot settings

| key | default | meaning |
| --- | --- | --- |
${slotRows.join("\n")}

In local mode a slot's \`device\` is where its members' engines run: each is started with
\`CUDA_VISIBLE_DEVICES\` set to it, over the model's own \`env\` (a model whose \`env\` names another GPU
is warned of at load). \`0:1\`, the NVIDIA container runtime's form of a MIG device, is not one CUDA reads
(a warning says so): locally, name the MIG device by its UUID (\`MIG-…\`, as \`nvidia-smi -L\` shows it).
On Kubernetes the webhook binds it as \`NVIDIA_VISIBLE_DEVICES\` ([webhooks](webhooks.md)).
`;
}

/** The loader's own line for a duration written without its unit, as the reference quotes it. */
function durationProblem(): string {
  const text = 'models:\n  qwen:\n    command: [vllm, serve, --port, "${PORT}"]\n    sleepAfter: 5 min\n';
  try {
    parseConfig(text, "snooze.yaml");
  } catch (error) {
    return (error as Error).message.split("\n")[0] ?? "";
  }
  throw new Error("the reference's example of a bad duration loaded");
}
