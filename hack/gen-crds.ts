// Writes config/crd/*.yaml from the zod schemas (lib/kube/crds.ts). With --check it writes nothing
// and exits 1 when a committed file differs from what the schemas produce.
//   node_modules/.bin/node hack/gen-crds.ts [--check]
import { readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { crdFiles } from "../lib/kube/crds.ts";

const dir = resolve(import.meta.dirname, "../config/crd");
const check = process.argv.includes("--check");
let stale = 0;
for (const [name, text] of Object.entries(crdFiles())) {
  const path = join(dir, name);
  const current = await readFile(path, "utf8").catch(() => "");
  if (current === text) continue;
  if (check) {
    console.error(`config/crd/${name} is out of date: run node_modules/.bin/node hack/gen-crds.ts`);
    stale++;
  } else {
    await writeFile(path, text);
    console.log(`wrote config/crd/${name}`);
  }
}
process.exitCode = stale > 0 ? 1 : 0;
