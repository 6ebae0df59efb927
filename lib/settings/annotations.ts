import { showValue } from "./allowed-form.ts";
import { kubeSlotName, modelId } from "./fields.ts";
import { type TierSettings, tierSettings } from "./model.ts";
import { inPlainWords } from "./plain-words.ts";
import { closestKey } from "./suggest.ts";

/** Annotations use the same settings as snooze.yaml, kebab-cased under this prefix. */
export const annotationPrefix = "snooze.dev/";

/** The model id clients use for an annotated workload (default: the workload's name). */
export const modelAnnotation = `${annotationPrefix}model`;

/** Annotations under the prefix that are not tier settings (set by Snooze itself). */
const reserved = new Set(["tier", "tier-since", "managed-by", "model"]);

/** Annotations live on Kubernetes: a slot is named as its Slot object is, unlike in snooze.yaml. */
const annotationSettings = tierSettings.extend({ slot: kubeSlotName.optional() });

const kebab = (camel: string) => camel.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const camelByKebab = new Map(Object.keys(tierSettings.shape).map((key) => [kebab(key), key]));

export interface AnnotationProblem {
  annotation: string;
  value: string;
  message: string;
}

/**
 * Reads `snooze.dev/*` annotations into tier settings. Annotation values are
 * strings, so booleans, integers and lists (comma-separated) are converted
 * before the one schema validates them.
 */
export function settingsFromAnnotations(annotations: Record<string, string> = {}): {
  settings?: TierSettings;
  problems: AnnotationProblem[];
} {
  const problems: AnnotationProblem[] = [];
  const raw: Record<string, unknown> = {};
  const source = new Map<string, string>();
  // The known keys are said once, with the first unknown one: not again for each of thousands.
  let knownSaid = false;
  for (const [name, value] of Object.entries(annotations)) {
    if (!name.startsWith(annotationPrefix)) continue;
    const short = name.slice(annotationPrefix.length);
    if (reserved.has(short)) continue;
    const key = camelByKebab.get(short);
    if (!key) {
      // As a misspelt key in snooze.yaml is answered: `snooze.dev/sleepAfter` (the file's spelling)
      // or `slep-after` named no setting in a list of nineteen (found by an outside tester).
      const near = closestKey(short, [...camelByKebab.keys(), ...reserved]);
      const meant = near ? `; did you mean ${annotationPrefix}${near}?` : "";
      problems.push({
        annotation: name,
        value,
        message: knownSaid
          ? `unknown setting${meant} (the known ones are listed with the first)`
          : `unknown setting${meant}; known: ${[...camelByKebab.keys()].map((k) => annotationPrefix + k).join(", ")}`,
      });
      knownSaid = true;
      continue;
    }
    raw[key] = coerce(key, value);
    source.set(key, name);
  }
  // Not a tier setting but the model id clients use: it becomes the Model's spec.model (trimmed;
  // empty means the workload's name), so it must pass what that field does.
  const id = annotations[modelAnnotation]?.trim();
  if (id) {
    const checked = modelId.safeParse(id, { error: inPlainWords(modelId) });
    if (!checked.success)
      problems.push({
        annotation: modelAnnotation,
        value: annotations[modelAnnotation]!,
        message: checked.error.issues[0]!.message,
      });
  }
  // In the words snooze.yaml's problems use ("expected true or false"), not zod's ("Invalid input:
  // expected boolean, received string"), which the autoscaler logged for a workload as it was
  // (found by an outside tester; the webhooks reworded some of them themselves).
  const parsed = annotationSettings.safeParse(raw, { error: inPlainWords(annotationSettings) });
  if (!parsed.success) {
    // A list's entries with the same problem are said once, naming them: ",,," was "may not be
    // empty" four times, and "a,B c," did not say which entry held whitespace (found by an outside
    // tester).
    const entries = new Map<string, { annotation: string; message: string; items: number[] }>();
    for (const issue of parsed.error.issues) {
      const key = String(issue.path[0]);
      const annotation = source.get(key) ?? annotationPrefix + kebab(key);
      const item = issue.path[1];
      if (typeof item === "number" && Array.isArray(raw[key])) {
        const same = `${annotation}\n${issue.message}`;
        const group = entries.get(same) ?? { annotation, message: issue.message, items: [] };
        group.items.push(item);
        entries.set(same, group);
        continue;
      }
      problems.push({ annotation, value: annotations[annotation] ?? "", message: issue.message });
    }
    for (const { annotation, message, items } of entries.values()) {
      const list = raw[camelByKebab.get(annotation.slice(annotationPrefix.length)) ?? ""] as unknown[];
      problems.push({
        annotation,
        value: annotations[annotation] ?? "",
        message: `${entriesNamed(items, list)}: ${message}`,
      });
    }
  }
  return problems.length > 0 ? { problems } : { settings: parsed.data, problems };
}

/** `entry 2 ("B c")`, `entry 3` (an empty one), or `entries 1, 2 and 4`: 1-based, as a person counts. */
function entriesNamed(items: number[], list: unknown[]): string {
  if (items.length === 1) {
    const value = list[items[0]!];
    return `entry ${items[0]! + 1}${value === "" ? "" : ` (${showValue(value)})`}`;
  }
  const numbers = items.map((i) => String(i + 1));
  return `entries ${numbers.slice(0, -1).join(", ")} and ${numbers.at(-1)}`;
}

function coerce(key: string, value: string): unknown {
  // The webhooks and the autoscaler match the slot as written: `gpu-0 ` is not `gpu-0`.
  if (key === "slot") return value;
  const trimmed = value.trim();
  if (key === "aliases") return trimmed === "" ? [] : trimmed.split(",").map((a) => a.trim());
  if (["sleep", "warmup"].includes(key))
    return trimmed === "true" ? true : trimmed === "false" ? false : trimmed;
  if (["sleepLevel", "queueDepth", "concurrency", "maxConnections", "priority"].includes(key)) {
    return /^-?\d+$/.test(trimmed) ? Number(trimmed) : trimmed;
  }
  return trimmed;
}

/** The annotation name of a setting, e.g. `sleepAfter` → `snooze.dev/sleep-after`. */
export function annotationFor(key: keyof TierSettings): string {
  return annotationPrefix + kebab(key);
}

/** Annotations Snooze writes itself or that are not settings of the model. */
const notSettings = new Set(["tier", "tier-since", "managed-by"]);

/** Whether a workload's annotations ask for a Model at all (any `snooze.dev/` setting). */
export function asksForModel(annotations: Record<string, string> = {}): boolean {
  return Object.keys(annotations).some(
    (name) => name.startsWith(annotationPrefix) && !notSettings.has(name.slice(annotationPrefix.length)),
  );
}
