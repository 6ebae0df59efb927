import { once } from "node:events";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import { type AddressInfo, connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { afterEach, describe, expect, test } from "vitest";
import type { PodNetwork } from "./pod-network.ts";
import { apiserverForPods, podCredentials } from "./service-account.ts";

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const caData = Buffer.from("-----BEGIN CERTIFICATE-----").toString("base64");
const kubeconfig = (server: string) => {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    // The stand-in API server below speaks plain HTTP, which client-node allows only so.
    clusters: [{ name: "c", server, ...(server.startsWith("http:") ? { skipTLSVerify: true } : { caData }) }],
    users: [{ name: "u", token: "kubelet" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return kc;
};
const network = (kind: "netns" | "loopback"): PodNetwork =>
  ({ kind, hostIP: "127.0.0.1" }) as unknown as PodNetwork;

describe("apiserverForPods: where a pod's processes reach the API server", () => {
  test("a pod in a network namespace of its own: through the node's pod-network address, to the API server's name", async () => {
    // The API server's port: what arrives there is echoed back.
    const echo = createServer((socket) => socket.pipe(socket));
    echo.listen(0, "127.0.0.1");
    await once(echo, "listening");
    cleanups.push(() => echo.close());
    const { port } = echo.address() as AddressInfo;
    const forwarded = await apiserverForPods(kubeconfig(`https://127.0.0.1:${port}`), network("netns"));
    cleanups.push(() => forwarded.close());
    const url = new URL(forwarded.server);
    expect(url.hostname).toBe("127.0.0.1");
    expect(Number(url.port)).not.toBe(port);
    expect(forwarded.tlsServerName).toBe("127.0.0.1");
    const socket = connect({ host: url.hostname, port: Number(url.port) });
    socket.end("ping");
    let answer = "";
    for await (const chunk of socket) answer += chunk;
    expect(answer).toBe("ping");
  });

  test("pods on the host's network (loopback): the API server's own address", async () => {
    const direct = await apiserverForPods(kubeconfig("https://127.0.0.1:6443"), network("loopback"));
    expect(direct).toMatchObject({ server: "https://127.0.0.1:6443" });
    expect(direct.tlsServerName).toBeUndefined();
  });
});

describe("podCredentials: the pod's ServiceAccount token, as the kubelet projects it", () => {
  async function standInApiserver() {
    const asked: { url: string; body: any }[] = [];
    const server = createHttpServer(async (req, res) => {
      let body = "";
      for await (const chunk of req) body += chunk;
      asked.push({ url: req.url ?? "", body: JSON.parse(body || "{}") });
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          apiVersion: "authentication.k8s.io/v1",
          kind: "TokenRequest",
          status: {
            token: `token-${asked.length}`,
            expirationTimestamp: new Date(Date.now() + 3_600_000).toISOString(),
          },
        }),
      );
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    cleanups.push(() => server.close());
    const kc = kubeconfig(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const dir = await mkdtemp(join(tmpdir(), "snooze-kubelet-sa-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    return { asked, kc, dir };
  }
  const pod = (spec: Record<string, unknown> = {}) =>
    ({
      metadata: { name: "adapter-1", namespace: "knative-eventing", uid: "uid-1" },
      spec: { serviceAccountName: "pingsource-mt-adapter", containers: [], ...spec },
    }) as unknown as V1Pod;

  test("a token bound to the pod, in a file a kubeconfig in KUBECONFIG names; gone with the pod", async () => {
    const { asked, kc, dir } = await standInApiserver();
    const apiserver = {
      server: "https://10.213.1.1:40000",
      tlsServerName: "127.0.0.1",
      close: async () => {},
    };
    const credentials = await podCredentials(
      kc.makeApiClient(CoreV1Api),
      kc,
      apiserver,
      pod(),
      dir,
      () => {},
    );
    expect(asked).toEqual([
      {
        url: "/api/v1/namespaces/knative-eventing/serviceaccounts/pingsource-mt-adapter/token",
        body: expect.objectContaining({
          spec: expect.objectContaining({
            boundObjectRef: { apiVersion: "v1", kind: "Pod", name: "adapter-1", uid: "uid-1" },
          }),
        }),
      },
    ]);
    const path = credentials!.env.KUBECONFIG!;
    const written = JSON.parse(readFileSync(path, "utf8"));
    expect(written.clusters[0].cluster).toMatchObject({
      server: "https://10.213.1.1:40000",
      "tls-server-name": "127.0.0.1",
      "insecure-skip-tls-verify": true,
    });
    expect(written.clusters[0].cluster["certificate-authority-data"]).toBeUndefined();
    expect(readFileSync(written.users[0].user.tokenFile, "utf8")).toBe("token-1");
    await credentials!.stop();
    expect(existsSync(path)).toBe(false);
  });

  test("none for a pod that says automountServiceAccountToken: false", async () => {
    const { asked, kc, dir } = await standInApiserver();
    const apiserver = { server: "https://127.0.0.1:6443", close: async () => {} };
    const none = await podCredentials(
      kc.makeApiClient(CoreV1Api),
      kc,
      apiserver,
      pod({ automountServiceAccountToken: false }),
      dir,
      () => {},
    );
    expect(none).toBeUndefined();
    expect(asked).toEqual([]);
  });
});
