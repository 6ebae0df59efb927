import { expect, test } from "vitest";
import { postJson, sim } from "./helpers.ts";

test("a hundred engines in one process, each with its own state", async () => {
  const heapBefore = process.memoryUsage().heapUsed;
  const engines = await Promise.all(
    Array.from({ length: 100 }, (_, i) => sim({ servedModelNames: [`m-${i}`], enableSleepMode: true })),
  );
  const heapPerEngine = (process.memoryUsage().heapUsed - heapBefore) / engines.length;
  // Loose: an engine is a server and a little state (about 30 KB measured), not megabytes.
  expect(heapPerEngine).toBeLessThan(500 * 1024);

  await Promise.all(engines.filter((_, i) => i % 2 === 1).map((engine) => postJson(engine.url, "/sleep")));
  const answers = await Promise.all(
    engines
      .filter((_, i) => i % 2 === 0)
      .map((engine, j) =>
        postJson(engine.url, "/v1/completions", { model: `m-${j * 2}`, prompt: "x", max_tokens: 2 }),
      ),
  );
  expect(answers.every((answer) => answer.status === 200)).toBe(true);
  expect(engines.map((engine) => engine.engine.isSleeping)).toEqual(engines.map((_, i) => i % 2 === 1));
});
