import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { createServer, request, type Server } from "node:http";
import type { Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { AppsV1Api, CoreV1Api, type V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { serviceRouterAnnotation } from "../../hack/kubelet/service-router.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import { pointServiceAtHost } from "./harness/host-address.ts";
import { createTestNamespace } from "./harness/namespace.ts";
import { suiteCluster } from "./harness/suite.ts";
import { viaProxy } from "./harness/via-proxy.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * The stand-in kubelet's Service router (hack/kubelet/service-router.ts), the cluster DNS and
 * kube-proxy of its pods' HTTP: against the real apiserver's Services and EndpointSlices (made by
 * the real endpointslice controller for a pod, or by hand for a server on the node), with real
 * sockets, asked as Go's net/http asks a proxy from HTTP_PROXY.
 */
const cluster = suiteCluster();
const apps = cluster.admin.makeApiClient(AppsV1Api);
const core = cluster.admin.makeApiClient(CoreV1Api);
const { kubelet } = cluster.info;
let ns: Awaited<ReturnType<typeof createTestNamespace>>;
let admin: KubeClient;
let router: string;
let nodeIP: string;
let echo: Server;
let echoPort: number;

const labels = { app: "sim", [kubelet.selector.key]: kubelet.selector.value };

beforeAll(async () => {
  if (kubelet.network !== "netns") return;
  ns = await createTestNamespace(cluster.admin, "snooze-e2e-router");
  admin = await KubeClient.fromKubeConfig(cluster.admin);
  const node = await core.readNode({ name: kubelet.nodeName });
  router = node.metadata?.annotations?.[serviceRouterAnnotation] ?? "";
  nodeIP = node.status?.addresses?.find((a) => a.type === "InternalIP")?.address ?? "";

  // A server on the node's own address (the pods' gateway) that says what it was sent.
  echo = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on("end", () =>
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ host: req.headers.host, method: req.method, url: req.url, body })),
    );
  });
  await new Promise<void>((resolve) => echo.listen(0, nodeIP, resolve));
  echoPort = (echo.address() as { port: number }).port;

  await core.createNamespacedService({
    namespace: ns.name,
    body: { metadata: { name: "echo" }, spec: { ports: [{ name: "http", port: 8080 }] } },
  });
  await pointServiceAtHost(
    admin,
    { namespace: ns.name, service: "echo", portName: "http" },
    nodeIP,
    echoPort,
  );
  await core.createNamespacedService({
    namespace: ns.name,
    body: {
      metadata: { name: "alias" },
      spec: { type: "ExternalName", externalName: `echo.${ns.name}.svc.cluster.local` },
    },
  });
  // A pod behind a Service by selector, its port by name: the endpointslice controller's slice.
  await core.createNamespacedService({
    namespace: ns.name,
    body: {
      metadata: { name: "sim" },
      spec: { selector: labels, ports: [{ name: "web", port: 80, targetPort: "http" }] },
    },
  });
  await apps.createNamespacedDeployment({
    namespace: ns.name,
    body: {
      metadata: { name: "sim" },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            schedulerName: kubelet.schedulerName,
            terminationGracePeriodSeconds: 2,
            containers: [
              {
                name: "vllm",
                image: "vllm/vllm-openai:v0.11.0",
                args: ["Qwen/Qwen3-0.6B", "--served-model-name", "qwen", "--load-time", "100ms"],
                ports: [{ name: "http", containerPort: 8000 }],
              },
            ],
          },
        },
      },
    },
  });
}, 60_000);

afterAll(async () => {
  await ns?.remove();
  await admin?.close();
  await new Promise((resolve) => (echo ? echo.close(resolve) : resolve(undefined)));
});

const svc = (name: string) => `${name}.${ns.name}.svc`;

/** A tunnel to `authority` through the proxy at `proxy` (CONNECT), as Go opens one for HTTPS_PROXY. */
function connectThrough(proxy: string, authority: string): Promise<Socket> {
  const at = new URL(proxy);
  return new Promise((resolve, reject) => {
    const req = request({ host: at.hostname, port: Number(at.port), method: "CONNECT", path: authority });
    req.on("connect", (res, socket) =>
      res.statusCode === 200 ? resolve(socket) : reject(new Error(`CONNECT answered ${res.statusCode}`)),
    );
    req.on("error", reject);
    req.end();
  });
}

describe.skipIf(kubelet.network !== "netns")("the stand-in kubelet's Service router", () => {
  test("the node names it, and every pod's processes get it as HTTP_PROXY with the node's address left direct", async () => {
    expect(router).toMatch(new RegExp(`^http://${nodeIP.replaceAll(".", "\\.")}:\\d+$`));
    const pod = await waitFor(
      async () => {
        const pods = await core.listNamespacedPod({ namespace: ns.name, labelSelector: "app=sim" });
        return pods.items.find((p: V1Pod) => p.status?.containerStatuses?.[0]?.containerID);
      },
      { what: "the sim pod to run", timeoutMs: 30_000 },
    );
    const pid = pod.status!.containerStatuses![0]!.containerID!.replace("snooze-sim://", "");
    const env = new Map(
      (await readFile(`/proc/${pid}/environ`, "utf8"))
        .split("\0")
        .map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)]),
    );
    expect(env.get("HTTP_PROXY")).toBe(router);
    expect(env.get("http_proxy")).toBe(router);
    expect(env.get("HTTPS_PROXY")).toBe(router);
    expect(env.get("NO_PROXY")?.split(",")).toContain(nodeIP);
  });

  test("a Service's name and port reach a ready pod at the port its targetPort names", async () => {
    const answer = await waitFor(
      async () => {
        const a = await viaProxy(router, `http://${svc("sim")}.cluster.local/v1/models`);
        return a.status === 200 ? a : undefined;
      },
      { what: "the sim behind its Service", timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(JSON.parse(answer.body).data.map((m: { id: string }) => m.id)).toEqual(["qwen"]);
  }, 40_000);

  test("the request goes through whole: method, path and query, body, and the Host the client named", async () => {
    const answer = await viaProxy(router, `http://${svc("echo")}:8080/a/b?c=d`, {
      method: "POST",
      headers: { "content-type": "application/json", connection: "keep-alive" },
      body: '{"x":1}',
    });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({
      host: `${svc("echo")}:8080`,
      method: "POST",
      url: "/a/b?c=d",
      body: '{"x":1}',
    });
  });

  test("an ExternalName Service is followed to the Service it names; the Host stays the one asked for", async () => {
    const answer = await viaProxy(router, `http://${svc("alias")}.cluster.local:8080/x`);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body).host).toBe(`${svc("alias")}.cluster.local:8080`);
  });

  test("an address that is no Service name is reached as it is", async () => {
    const answer = await viaProxy(router, `http://${nodeIP}:${echoPort}/direct`);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body).url).toBe("/direct");
  });

  test("a Service that is not there, or a port it has not, is a 502 saying which; a tunnel that cannot be made, too", async () => {
    const missing = await viaProxy(router, `http://${svc("nowhere")}/`);
    expect(missing.status).toBe(502);
    expect(missing.body).toContain(`no Service ${ns.name}/nowhere`);
    const port = await viaProxy(router, `http://${svc("echo")}:9999/`);
    expect(port.status).toBe(502);
    expect(port.body).toContain(`Service ${ns.name}/echo has no port 9999`);
    // A tunnel likewise, before it is up: to a Service not there, and to an address that refuses.
    await expect(connectThrough(router, `${svc("nowhere")}:80`)).rejects.toThrow("CONNECT answered 502");
    await expect(connectThrough(router, `${nodeIP}:1`)).rejects.toThrow("CONNECT answered 502");
  });

  test("https://kubernetes.default.svc, through the tunnel, is the API server, whose OIDC discovery names its keys there too", async () => {
    const token = (
      await core.createNamespacedServiceAccountToken({
        name: "default",
        namespace: ns.name,
        body: { spec: { audiences: [], expirationSeconds: 600 } },
      })
    ).status!.token;
    const tunnel = await connectThrough(router, "kubernetes.default.svc:443");
    // The name the API server's certificate holds, as the pods' kubeconfig says (tls-server-name).
    const tls = tlsConnect({
      socket: tunnel,
      servername: new URL(cluster.info.server).hostname,
      ca: cluster.info.caPem,
    });
    await once(tls, "secureConnect");
    const answer = await new Promise<string>((resolve, reject) => {
      let text = "";
      tls.on("data", (chunk: Buffer) => {
        text += chunk.toString();
      });
      tls.on("end", () => resolve(text));
      tls.on("error", reject);
      tls.write(
        `GET /.well-known/openid-configuration HTTP/1.1\r\nhost: kubernetes.default.svc\r\nauthorization: Bearer ${token}\r\nconnection: close\r\n\r\n`,
      );
    });
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    const discovery = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4));
    expect(discovery.jwks_uri).toBe("https://kubernetes.default.svc/openid/v1/jwks");
  });

  test("CONNECT (what an https:// URL asks of HTTPS_PROXY) tunnels to the Service's endpoint", async () => {
    const socket = await connectThrough(router, `${svc("echo")}:8080`);
    const body = await new Promise<string>((resolve, reject) => {
      let text = "";
      socket.on("data", (chunk: Buffer) => {
        text += chunk.toString();
      });
      socket.on("end", () => resolve(text));
      socket.on("error", reject);
      socket.write(`GET /tunnelled HTTP/1.1\r\nhost: ${svc("echo")}:8080\r\nconnection: close\r\n\r\n`);
    });
    expect(body).toMatch(/^HTTP\/1\.1 200/);
    expect(body).toContain('"url":"/tunnelled"');
  });
});
