import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, test } from "vitest";
import { KubeClient } from "./client.ts";

let server: Server | undefined;
afterEach(() => {
  server?.close();
  server = undefined;
});

/** An API server stand-in that records each request's method, query and User-Agent. */
async function recordingServer() {
  const seen: { method: string; fieldManager: string | null; userAgent?: string }[] = [];
  server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    seen.push({
      method: req.method ?? "",
      fieldManager: url.searchParams.get("fieldManager"),
      userAgent: req.headers["user-agent"],
    });
    req.resume();
    res.setHeader("content-type", "application/json");
    res.end("{}");
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

test("writes name the component as their field manager (and User-Agent); reads carry none; an apply's own manager wins", async () => {
  // Found by a probe: without it the API server named the manager after the HTTP library
  // (`undici`), so a server-side apply's conflict over a Deployment's replicas named no Snooze part.
  const { url, seen } = await recordingServer();
  const client = new KubeClient({ server: url }, { fieldManager: "snooze-autoscaler" });
  await client.get("/api/v1/pods");
  await client.create("/api/v1/namespaces/a/configmaps", {});
  await client.replace("/api/v1/namespaces/a/configmaps/c", {});
  await client.patch("/api/v1/namespaces/a/pods/p", {});
  await client.delete("/api/v1/namespaces/a/pods/p");
  await client.request("PATCH", "/apis/apps/v1/namespaces/a/deployments/d", {
    body: {},
    contentType: "application/apply-patch+yaml",
    query: { fieldManager: "gitops" },
  });
  await client.close();
  expect(seen.map((r) => [r.method, r.fieldManager])).toEqual([
    ["GET", null],
    ["POST", "snooze-autoscaler"],
    ["PUT", "snooze-autoscaler"],
    ["PATCH", "snooze-autoscaler"],
    ["DELETE", null],
    ["PATCH", "gitops"],
  ]);
  expect(new Set(seen.map((r) => r.userAgent))).toEqual(new Set(["snooze-autoscaler"]));
});

test("without a field manager the client leaves both to the API server", async () => {
  const { url, seen } = await recordingServer();
  const client = new KubeClient({ server: url });
  await client.create("/api/v1/namespaces/a/configmaps", {});
  await client.close();
  expect(seen[0]?.fieldManager).toBeNull();
});
