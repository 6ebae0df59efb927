import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, test } from "vitest";
import type { KubeClient } from "../lib/kube/client.ts";
import { silentLogger } from "../lib/log.ts";
import { AdminActionUnfinished } from "./admin.ts";
import { KubeControlPlane } from "./kube-control-plane.ts";

let server: Server | undefined;
afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

/** An autoscaler Service that answers every admin call with `status` and `body`, and records the calls. */
async function autoscaler(status: number, body: unknown) {
  const calls: { url?: string; authorization?: string }[] = [];
  server = createServer((req, res) => {
    calls.push({ url: req.url, authorization: req.headers.authorization });
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  const plane = new KubeControlPlane({
    client: { bearerToken: async () => "sa-token" } as unknown as KubeClient,
    autoscalerUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    identity: "activator-0",
    log: silentLogger,
    onModel: () => {},
    onModelRemoved: () => {},
  });
  return { plane, calls };
}

test("a sleep or stop the autoscaler could not finish (504) is AdminActionUnfinished naming the tier, as in local mode", async () => {
  const { plane, calls } = await autoscaler(504, { status: 504, message: "stop: not done", tier: "ready" });
  const failed = await plane.admin("qwen", "stop").catch((error: unknown) => error);
  expect(failed).toBeInstanceOf(AdminActionUnfinished);
  expect((failed as Error).message).toMatch(/^The stop of qwen did not finish: the model is ready\./);
  expect(calls).toEqual([{ url: "/snooze/v1/models/qwen/stop", authorization: "Bearer sa-token" }]);
});

test("done is done; any other failure carries the autoscaler's message", async () => {
  expect(
    await (await autoscaler(200, { status: 200, message: "sleep: done", tier: "asleep-1" })).plane.admin(
      "qwen",
      "sleep",
    ),
  ).toBeUndefined();
  server!.close();
  const { plane } = await autoscaler(503, {
    status: 503,
    message: "no autoscaler leads qwen right now; retry",
  });
  await expect(plane.admin("qwen", "sleep")).rejects.toThrow("no autoscaler leads qwen right now; retry");
  // A wake has no "unfinished": a 504 there is a failure with its message.
  server!.close();
  const waking = await autoscaler(504, { status: 504, message: "wake: timed out" });
  await expect(waking.plane.admin("qwen", "wake")).rejects.not.toBeInstanceOf(AdminActionUnfinished);
});
