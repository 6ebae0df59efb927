import { writeFileSync } from "node:fs";
import { replay } from "./replay.ts";
import { generateTrace } from "./trace.ts";
import { budgetSweep, policies, slots, worldModels } from "./world.ts";

/** One policy's replay in its own process: `node worker.ts <policy> <seed> <days> <out.json>`. */
const [name, seedText, daysText, out] = process.argv.slice(2);
const policy = [...policies, ...budgetSweep].find((p) => p.name === name);
if (!policy || !out) {
  console.error("usage: node hack/bench/prewarm/worker.ts <policy> <seed> <days> <out.json>");
  process.exit(2);
}
const seed = Number(seedText);
const trace = generateTrace(worldModels, Number(daysText), seed);
const result = await replay(trace, worldModels, slots, policy, seed);
writeFileSync(out, JSON.stringify(result));
