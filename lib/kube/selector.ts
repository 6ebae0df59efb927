/**
 * Label selectors: the structured form of a workload's `spec.selector`, the string form the scale
 * subresource carries in `status.selector` (`app=qwen,tier in (a,b),!canary`), and matching.
 */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: {
    key: string;
    operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
    values?: string[];
  }[];
}

type Requirement =
  | { key: string; op: "in" | "notin"; values: string[] }
  | { key: string; op: "exists" | "!exists" };

/** The string form kubectl and the scale subresource use. */
export function selectorString(selector: LabelSelector | undefined): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(selector?.matchLabels ?? {}).sort(([a], [b]) =>
    a.localeCompare(b),
  ))
    parts.push(`${key}=${value}`);
  for (const e of selector?.matchExpressions ?? []) {
    if (e.operator === "In") parts.push(`${e.key} in (${(e.values ?? []).join(",")})`);
    else if (e.operator === "NotIn") parts.push(`${e.key} notin (${(e.values ?? []).join(",")})`);
    else if (e.operator === "Exists") parts.push(e.key);
    else parts.push(`!${e.key}`);
  }
  return parts.join(",");
}

/** Parses the string form; undefined when it is malformed. An empty string selects everything. */
export function parseSelector(text: string): Requirement[] | undefined {
  const requirements: Requirement[] = [];
  // Split on commas outside parentheses.
  const terms: string[] = [];
  let depth = 0;
  let current = "";
  for (const c of text) {
    if (c === "(") depth++;
    if (c === ")") depth--;
    if (c === "," && depth === 0) {
      terms.push(current);
      current = "";
    } else current += c;
  }
  if (current.trim() || terms.length > 0) terms.push(current);
  for (const raw of terms) {
    const term = raw.trim();
    if (!term) return undefined;
    let m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
    if (m) {
      const values = m[3]!
        .split(",")
        .map((v) => v.trim())
        .filter((v) => v !== "");
      requirements.push({ key: m[1]!, op: m[2] as "in" | "notin", values });
      continue;
    }
    m = /^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$/.exec(term);
    if (m) {
      requirements.push({ key: m[1]!, op: m[2] === "!=" ? "notin" : "in", values: [m[3]!] });
      continue;
    }
    m = /^(!?)([\w./-]+)$/.exec(term);
    if (m) {
      requirements.push({ key: m[2]!, op: m[1] ? "!exists" : "exists" });
      continue;
    }
    return undefined;
  }
  return requirements;
}

export function matches(requirements: Requirement[], labels: Record<string, string> = {}): boolean {
  return requirements.every((r) => {
    const has = Object.hasOwn(labels, r.key);
    switch (r.op) {
      // "notin" is the default branch.
      case "exists":
        return has;
      case "!exists":
        return !has;
      case "in":
        return has && r.values.includes(labels[r.key]!);
      default:
        return !has || !r.values.includes(labels[r.key]!);
    }
  });
}

/** A matcher for a selector string; one that never matches when the string is empty or malformed. */
export function selectorMatcher(text: string | undefined): (labels?: Record<string, string>) => boolean {
  const requirements = text ? parseSelector(text) : undefined;
  // An empty selector would select every pod of the namespace: never what a Model means.
  if (!requirements || requirements.length === 0) return () => false;
  return (labels) => matches(requirements, labels);
}
