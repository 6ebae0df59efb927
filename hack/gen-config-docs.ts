// Writes docs/configuration.md from the settings schema. With --check it writes nothing
// and exits 1 when the committed file differs.
//   node_modules/.bin/node hack/gen-config-docs.ts [--check]
import { readFile, writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import { configurationReference } from "../lib/settings/reference.ts";

const path = resolve(import.meta.dirname, "../docs/configuration.md");
const text = configurationReference();
const current = await readFile(path, "utf8").catch(() => "");
if (process.argv.includes("--check")) {
  if (current !== text)
    console.error("docs/configuration.md is out of date: run node_modules/.bin/node hack/gen-config-docs.ts");
  process.exitCode = current === text ? 0 : 1;
} else if (current !== text) {
  await writeFile(path, text);
  console.log("wrote docs/configuration.md");
}
