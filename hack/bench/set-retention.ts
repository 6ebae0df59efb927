/**
 * Why per-request entries live in a linked list (`lib/linked-set.ts`), not a long-lived `Set`: the
 * same workload three ways, each in a Node process of its own under `--trace-gc-nvp`, with what the
 * scavenges promoted to the old generation summed from V8's own lines.
 *
 *   node hack/bench/set-retention.ts
 *
 * The workload: 200,000 "requests" (each a few KiB of objects and a closure over them), 64 in
 * flight at a time, each registered while in flight in a `Set`, in a `LinkedSet`, or nowhere, with
 * one full collection after the first thousand.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { LinkedSet } from "../../lib/linked-set.ts";

type Mode = "none" | "set" | "linked-set";
const modes: Mode[] = ["none", "set", "linked-set"];

function workload(mode: Mode): void {
  const set = new Set<() => number>();
  const list = new LinkedSet<() => number>();
  const inFlight: { done: () => number; remove?: () => void }[] = [];
  let sink = 0;
  const started = performance.now();
  for (let i = 0; i < 200_000; i++) {
    // One full collection early on, as `snooze serve` runs after start-up (and as any long run
    // has): from then on the Set's table is in the old generation.
    if (i === 1_000) (globalThis as { gc?: () => void }).gc?.();
    const payload = Array.from({ length: 500 }, (_, n) => ({ n }));
    const done = () => payload.length;
    const remove = mode === "linked-set" ? list.add(done) : undefined;
    if (mode === "set") set.add(done);
    inFlight.push({ done, remove });
    if (inFlight.length > 64) {
      const oldest = inFlight.shift()!;
      if (mode === "set") set.delete(oldest.done);
      oldest.remove?.();
      sink += oldest.done();
    }
  }
  console.log(`elapsed=${(performance.now() - started).toFixed(0)} sink=${sink}`);
}

const child = process.argv[2] as Mode | undefined;
if (child) workload(child);
else {
  const rows = modes.map((mode) => {
    const out = execFileSync(
      process.execPath,
      ["--trace-gc-nvp", "--expose-gc", fileURLToPath(import.meta.url), mode],
      { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
    );
    let promoted = 0;
    let scavenges = 0;
    let fullCollections = 0;
    for (const line of out.split("\n")) {
      if (line.includes("gc=s ")) {
        scavenges++;
        promoted += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0);
      } else if (line.includes("gc=mc ")) fullCollections++;
    }
    const elapsed = /elapsed=(\d+)/.exec(out)?.[1] ?? "?";
    return `| ${mode} | ${(promoted / 1e6).toFixed(1)} | ${scavenges} | ${fullCollections} | ${elapsed} |`;
  });
  console.log("| registered in | promoted by scavenges, MB | scavenges | full collections | ms |");
  console.log("| --- | --- | --- | --- | --- |");
  for (const row of rows) console.log(row);
}
