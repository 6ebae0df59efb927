import { afterEach, expect, test } from "vitest";
import { startActivator, type TestActivator } from "../test/abuse/harness.ts";
import { metricValue } from "../test/helpers/local-snooze.ts";

/** `snooze_requests_total` counts every request to /v1/, those the server answers itself too. */
let snooze: TestActivator | undefined;
afterEach(async () => {
  await snooze?.close();
  snooze = undefined;
});

test("CORS preflights and /v1/models are counted in snooze_requests_total", async () => {
  // Found by an outside tester: preflights refused 403, `GET /v1/models` and `/v1/models/{id}` were
  // answered but never counted, though every request to /v1/ is said to be.
  snooze = await startActivator({}, { allowedOrigins: ["https://ok.example"] });
  const count = async (labels: Record<string, string>) =>
    metricValue(await snooze!.registry.metrics(), "snooze_requests_total", labels);
  const preflight = (origin: string) =>
    fetch(`${snooze!.url}/v1/chat/completions`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "POST" },
    });
  expect((await preflight("https://evil.example")).status).toBe(403);
  expect((await preflight("https://ok.example")).status).toBe(204);
  expect((await fetch(`${snooze.url}/v1/models`)).status).toBe(200);
  expect((await fetch(`${snooze.url}/v1/models`, { method: "HEAD" })).status).toBe(200);
  expect((await fetch(`${snooze.url}/v1/models/m`)).status).toBe(200);
  expect((await fetch(`${snooze.url}/v1/models/nope`)).status).toBe(404);
  expect((await fetch(`${snooze.url}/v1/models/%ZZ`)).status).toBe(400);
  expect(await count({ model: "", code: "403" })).toBe(1);
  expect(await count({ model: "", code: "204" })).toBe(1);
  expect(await count({ model: "", code: "200" })).toBe(2);
  expect(await count({ model: "m", code: "200" })).toBe(1);
  expect(await count({ model: "", code: "404" })).toBe(1);
  expect(await count({ model: "", code: "400" })).toBe(1);
  // Nothing counted twice: seven requests, seven counts.
  expect(await count({})).toBe(7);
});
