/**
 * The sum of one metric's samples in an engine's Prometheus text, over those whose labels include
 * `labels`; 0 when it has none. Each sample line is read as the format has it: the name, the label
 * set (values quoted, `\"`, `\\` and `\n` escaped, so a `}` or a space may be in one), the value,
 * then an optional timestamp. Found by an outside tester: the last word of the line was read as the
 * value, so a sample with a timestamp counted its milliseconds since 1970 (a sleeping engine's every
 * `vllm:engine_sleep_state` above 0, read as level 2).
 */
export function sumMetric(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels);
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    let at = name.length;
    let found: Map<string, string> | undefined;
    if (line[at] === "{") {
      const set = labelSet(line, at + 1);
      if (!set) continue;
      found = set.labels;
      at = set.end;
    } else if (line[at] !== " " && line[at] !== "\t") continue; // another metric's name
    if (!wanted.every(([key, value]) => found?.get(key) === value)) continue;
    const value = Number(
      line
        .slice(at)
        .trim()
        .split(/[ \t]+/)[0],
    );
    if (Number.isFinite(value)) total += value;
  }
  return total;
}

/** The labels of the set that begins at `from` (after its `{`), and where it ends; none when malformed. */
function labelSet(line: string, from: number): { labels: Map<string, string>; end: number } | undefined {
  const labels = new Map<string, string>();
  let i = from;
  for (;;) {
    while (line[i] === " " || line[i] === ",") i++;
    if (line[i] === "}") return { labels, end: i + 1 };
    const equals = line.indexOf("=", i);
    if (equals < 0) return undefined;
    const key = line.slice(i, equals).trim();
    i = equals + 1;
    while (line[i] === " ") i++;
    if (line[i] !== '"') return undefined;
    let value = "";
    for (i++; i < line.length && line[i] !== '"'; i++) {
      if (line[i] !== "\\") value += line[i];
      else value += line[++i] === "n" ? "\n" : (line[i] ?? "");
    }
    if (line[i] !== '"') return undefined;
    i++;
    labels.set(key, value);
  }
}
