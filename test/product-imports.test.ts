import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { expect, test } from "vitest";

/**
 * What `snooze` loads at run time comes from package.json's `dependencies`: a devDependency
 * (client-node, vitest, ...) imported by a product file would be missing from a production install
 * and, for client-node, costs every process ~85 MiB and 0.6 s at start-up. Tests, hack/ and type-only
 * imports (erased before running) are exempt.
 */
const root = join(import.meta.dirname, "..");
const productFolders = ["activator", "autoscaler", "bin", "cli", "lib", "webhooks"];

function* sources(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(path);
    else if (/\.(ts|js)$/.test(entry.name) && !/\.test\.ts$/.test(entry.name)) yield path;
  }
}

/** Bare specifiers of value imports: `import x from "pkg"`, `import "pkg"`, `import("pkg")`, `export ... from`. */
function runtimeImports(text: string): string[] {
  const specifiers: string[] = [];
  const statement =
    /^\s*(import|export)\s+(type\s+)?[^;"'`]*?from\s+"([^"]+)"|^\s*import\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)/gm;
  for (const m of text.matchAll(statement)) {
    if (m[2]) continue; // import type ... / export type ...
    const specifier = m[3] ?? m[4] ?? m[5]!;
    if (specifier.startsWith(".") || specifier.startsWith("node:")) continue;
    specifiers.push(specifier);
  }
  return specifiers;
}

const packageOf = (specifier: string) =>
  specifier.startsWith("@") ? specifier.split("/").slice(0, 2).join("/") : specifier.split("/")[0]!;

test("product files import only packages from dependencies", () => {
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
  };
  const problems: string[] = [];
  for (const folder of productFolders) {
    for (const path of sources(join(root, folder))) {
      for (const specifier of runtimeImports(readFileSync(path, "utf8"))) {
        if (!(packageOf(specifier) in manifest.dependencies))
          problems.push(`${relative(root, path)} imports ${specifier}`);
      }
    }
  }
  expect(problems).toEqual([]);
});

test("the import scanner sees value imports and skips type-only ones", () => {
  expect(
    runtimeImports(
      [
        'import { KubeConfig } from "@kubernetes/client-node";',
        'import type { V1Pod } from "@kubernetes/client-node";',
        'import {\n  a,\n  b,\n} from "undici";',
        'import "reflect-metadata";',
        'const m = await import("yaml");',
        'import { x } from "./local.ts";',
        'import { y } from "node:fs";',
      ].join("\n"),
    ).map(packageOf),
  ).toEqual(["@kubernetes/client-node", "undici", "reflect-metadata", "yaml"]);
});
