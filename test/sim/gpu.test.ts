import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, test } from "vitest";
import { SimStartError } from "../../hack/sim/engine.ts";
import type { SimOptions } from "../../hack/sim/options.ts";
import { getJson, post, postJson, sim, tempDir } from "./helpers.ts";

const GiB = 2 ** 30;

/** A 24 GiB GPU where an awake engine takes 0.6 of it (8 GiB weights + 6.4 GiB KV cache): one fits. */
function onGpu(dir: string, id = "0", extra: Partial<SimOptions> = {}): Partial<SimOptions> {
  return {
    gpu: { id, memoryBytes: 24 * GiB, modelBytes: 8 * GiB, dir },
    gpuMemoryUtilization: 0.6,
    ...extra,
  };
}

describe("simulated GPU", () => {
  test("a second engine on a full GPU fails to start with vLLM's error", async () => {
    const dir = tempDir();
    const first = await sim({ ...onGpu(dir), servedModelNames: ["first"] });
    expect(first.engine.state().gpu).toMatchObject({ id: "0", claimedBytes: Math.floor(0.6 * 24 * GiB) });
    const failure = await sim({ ...onGpu(dir), servedModelNames: ["second"] }).catch((error) => error);
    expect(failure).toBeInstanceOf(SimStartError);
    expect(failure.message).toContain(
      "Free memory on device cuda:0 (9.60 GiB/24.00 GiB) on startup is less than",
    );
    expect(failure.message).toContain("first (pid");
    // Another GPU id is another device.
    await sim({ ...onGpu(dir, "1"), servedModelNames: ["elsewhere"] });
  });

  test("sleeping frees the memory; waking into a full GPU is a 500 and the engine stays asleep", async () => {
    const dir = tempDir();
    const a = await sim({ ...onGpu(dir), servedModelNames: ["a"] });
    await post(a.url, "/sleep?level=1");
    expect(a.engine.state().gpu?.claimedBytes).toBe(0);

    const b = await sim({ ...onGpu(dir), servedModelNames: ["b"] });
    const refused = await postJson(a.url, "/wake_up");
    expect(refused.status).toBe(500);
    expect(refused.json.error).toMatchObject({ type: "InternalServerError", code: 500 });
    expect(refused.json.error.message).toMatch(/^CUDA Error: out of memory/);
    expect(refused.json.error.message).toContain("b (pid");
    expect((await getJson(a.url, "/is_sleeping")).json.is_sleeping).toBe(true);
    expect(a.engine.state().gpu?.claimedBytes).toBe(0);

    await post(b.url, "/sleep?level=2");
    expect((await post(a.url, "/wake_up")).status).toBe(200);
    expect((await getJson(a.url, "/is_sleeping")).json.is_sleeping).toBe(false);
    expect((await postJson(a.url, "/v1/completions", { prompt: "x", max_tokens: 1 })).status).toBe(200);
  });

  test("a level-2 wake claims the weights first and the KV cache after", async () => {
    const dir = tempDir();
    const a = await sim({ ...onGpu(dir), servedModelNames: ["a"] });
    await post(a.url, "/sleep?level=2");
    await post(a.url, "/wake_up?tags=weights");
    expect(a.engine.state().gpu?.claimedBytes).toBe(8 * GiB);
    // 8 GiB of weights + another engine's 14.4 GiB fit in 24 GiB; the KV cache then does not.
    await sim({ ...onGpu(dir), servedModelNames: ["b"] });
    await postJson(a.url, "/collective_rpc", { method: "reload_weights" });
    const kv = await postJson(a.url, "/wake_up?tags=kv_cache");
    expect(kv.status).toBe(500);
    expect(kv.json.error.message).toContain("waking kv_cache needs 6.40 GiB");
    expect((await getJson(a.url, "/is_sleeping")).json.is_sleeping).toBe(true);
  });

  test("level 0 keeps the memory; closing an engine releases it", async () => {
    const dir = tempDir();
    const a = await sim({ ...onGpu(dir), servedModelNames: ["a"] });
    await post(a.url, "/sleep?level=0");
    expect(a.engine.state().gpu?.claimedBytes).toBeGreaterThan(0);
    await expect(sim({ ...onGpu(dir), servedModelNames: ["b"] })).rejects.toBeInstanceOf(SimStartError);
    await a.close();
    await sim({ ...onGpu(dir), servedModelNames: ["b"] });
  });

  test("claims of dead processes count for nothing and are swept away", async () => {
    const dir = tempDir();
    const device = path.join(dir, "gpu-0");
    fs.mkdirSync(device, { recursive: true });
    const stale = path.join(device, "claim-dead.json");
    fs.writeFileSync(stale, JSON.stringify({ pid: 2 ** 22 + 12_345, bytes: 24 * GiB, holder: "ghost" }));
    await sim({ ...onGpu(dir), servedModelNames: ["a"] });
    expect(fs.existsSync(stale)).toBe(false);
  });

  test("without --gpu-id memory is unlimited", async () => {
    const first = await sim();
    const second = await sim();
    expect(first.engine.state().gpu).toBeNull();
    expect(second.engine.state().gpu).toBeNull();
  });
});
