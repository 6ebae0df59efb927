import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { expect, test } from "vitest";

// The docs name the project's files; a refactor that moves or splits one leaves them pointing at
// nothing, and a new module left out of docs/architecture.md's tables is a concept no reader finds
// (found by an outside tester: 50 files of activator/ and autoscaler/ were in no table).

const root = join(import.meta.dirname, "..");
const read = (path: string) => readFileSync(join(root, path), "utf8");

/** Product files of a directory, recursively: not tests, not what the tests keep beside them. */
function productFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && !entry.name.endsWith(".test.ts"))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

/**
 * The files docs/architecture.md's tables name in their first column, as repository paths: the
 * data plane's table names them under `activator/`, the control plane's under `autoscaler/`, the
 * Kubernetes table by their whole path. Directories (a name ending in `/`) are not files.
 */
function architectureRows(): string[] {
  const sections: [heading: string, prefix: string][] = [
    ["## Data plane (`activator/`)", "activator/"],
    ["## Control plane (`autoscaler/`)", "autoscaler/"],
    ["## On Kubernetes", ""],
  ];
  const text = read("docs/architecture.md");
  const named: string[] = [];
  for (const [heading, prefix] of sections) {
    const start = text.indexOf(heading);
    expect(start, heading).toBeGreaterThanOrEqual(0);
    const next = text.indexOf("\n## ", start + heading.length);
    const section = text.slice(start, next === -1 ? undefined : next);
    for (const line of section.split("\n")) {
      const first = /^\|([^|]*)\|/.exec(line)?.[1];
      if (first === undefined) continue;
      for (const [, name = ""] of first.matchAll(/`([^`]+)`/g)) {
        if (!name.endsWith("/")) named.push(`${prefix}${name}`);
      }
    }
  }
  return named;
}

test("docs/architecture.md's tables name every file of activator/ and autoscaler/, once, and none that is gone", () => {
  const named = architectureRows();
  const files = [...productFiles("activator"), ...productFiles("autoscaler")];
  expect(
    files.filter((file) => !named.includes(file)),
    "files in no table",
  ).toEqual([]);
  expect(
    named.filter((name) => !existsSync(join(root, name))),
    "rows of files that are gone",
  ).toEqual([]);
  expect(
    named.filter((name, i) => named.indexOf(name) !== i),
    "files in two rows",
  ).toEqual([]);
});

/** Top-level directories of the repository a doc may name a path under. */
const topDirs = [
  "activator",
  "autoscaler",
  "bin",
  "cli",
  "config",
  "docs",
  "hack",
  "lib",
  "test",
  "webhooks",
];

/** Paths the docs name in another project's tree (Knative's modules, Kubernetes' own), not in this one. */
const elsewhere = new Set([
  "config/core",
  "config/brokers/mt-channel-broker",
  "config/channels/in-memory-channel",
  "hack/lib/version.sh",
]);

test("every repository path the docs name exists", () => {
  const docs = ["README.md", ...readdirSync(join(root, "docs")).map((name) => `docs/${name}`)].filter(
    // A benchmark run rewrites this one, naming what it ran.
    (path) => path.endsWith(".md") && path !== "docs/benchmarks.md",
  );
  const missing: string[] = [];
  for (const doc of docs) {
    for (const [, path = ""] of read(doc).matchAll(/`([\w./-]+\/[\w.-]*)`/g)) {
      if (!topDirs.includes(path.split("/")[0] ?? "") || elsewhere.has(path)) continue;
      if (!existsSync(join(root, path))) missing.push(`${doc}: ${path}`);
    }
  }
  expect(missing).toEqual([]);
});
