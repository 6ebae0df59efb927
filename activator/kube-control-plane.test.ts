import { once } from "node:events";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Registry } from "prom-client";
import { afterEach, expect, test } from "vitest";
import type { KubeAutoscaler } from "../autoscaler/kube/autoscaler.ts";
import { createControlServer } from "../autoscaler/kube/control-server.ts";
import type { AdminOutcome } from "../lib/control-protocol.ts";
import type { KubeClient } from "../lib/kube/client.ts";
import { silentLogger } from "../lib/log.ts";
import { AdminActionUnfinished, SleepStoppedInstead } from "./admin.ts";
import { KubeControlPlane } from "./kube-control-plane.ts";

let server: Server | undefined;
afterEach(() => {
  server?.close();
  server = undefined;
});

/**
 * The activator's control plane against the autoscaler's real control server, whose admin action
 * (the Model's leader carrying it out) answers `outcome`; the calls it got are recorded.
 */
async function againstAutoscaler(outcome: AdminOutcome) {
  const calls: unknown[][] = [];
  const autoscaler = {
    modelDemand: { handle: () => false },
    admin: async (...args: unknown[]) => {
      calls.push(args);
      return outcome;
    },
  } as unknown as KubeAutoscaler;
  server = createControlServer(autoscaler, new Registry(), {
    authenticate: async (token) =>
      token === "sa-token"
        ? { ok: true, username: "system:serviceaccount:snooze-system:snooze-activator" }
        : { ok: false, status: 401, message: "not a ServiceAccount of Snooze" },
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
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

test("a sleep or stop the Model's leader could not finish (504) is AdminActionUnfinished naming the tier, as in local mode", async () => {
  const { plane, calls } = await againstAutoscaler({
    status: 504,
    message: "stop: timed-out",
    tier: "ready",
  });
  const failed = await plane.admin("qwen", "stop").catch((error: unknown) => error);
  expect(failed).toBeInstanceOf(AdminActionUnfinished);
  expect((failed as Error).message).toBe("The stop of qwen did not finish in its time: the model is ready.");
  expect(calls).toEqual([["qwen", "stop", false, undefined]]);
});

test("a sleep a request took back on the leader says so, not a tier caught mid-drain", async () => {
  const { plane } = await againstAutoscaler({
    status: 504,
    message: "sleep: taken-back",
    tier: "draining",
    takenBack: true,
  });
  await expect(plane.admin("qwen", "sleep")).rejects.toThrow(
    "The sleep of qwen was taken back: a request (or a wake) came for it after it was asked, so the model stays awake (or is awake again for it); ask again once it is idle.",
  );
});

test("a sleep the engine failed on the leader (stopped instead) is SleepStoppedInstead with the reason, as in local mode", async () => {
  const { plane } = await againstAutoscaler({
    status: 502,
    message: "POST /sleep?level=1&mode=wait answered 500: boom",
    tier: "cold",
    stoppedInstead: true,
  });
  const failed = await plane.admin("qwen", "sleep").catch((error: unknown) => error);
  expect(failed).toBeInstanceOf(SleepStoppedInstead);
  expect((failed as Error).message).toBe(
    "The sleep of qwen failed (POST /sleep?level=1&mode=wait answered 500: boom); its engine was stopped instead, so the model is cold and its next request starts it.",
  );
});

test("done is done; another failure carries the autoscaler's message; a wake is never 'unfinished'", async () => {
  const done = await againstAutoscaler({ status: 200, message: "sleep: done", tier: "asleep-1" });
  await expect(done.plane.admin("qwen", "sleep")).resolves.toMatchObject({ tier: "asleep-1" });
  server!.close();
  const leaderless = await againstAutoscaler({
    status: 503,
    message: "no autoscaler leads qwen right now; retry",
  });
  await expect(leaderless.plane.admin("qwen", "sleep")).rejects.toThrow(
    "no autoscaler leads qwen right now; retry",
  );
  server!.close();
  const wake = await againstAutoscaler({ status: 504, message: "wake: timed out" });
  const failed = await wake.plane.admin("qwen", "wake").catch((error: unknown) => error);
  expect(failed).not.toBeInstanceOf(AdminActionUnfinished);
  expect((failed as Error).message).toBe("wake: timed out");
});
