import { once } from "node:events";
import {
  createServer,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  request,
  type Server,
} from "node:http";
import { connect, type Socket } from "node:net";
import { CoreV1Api, DiscoveryV1Api, type KubeConfig, type V1ServicePort } from "@kubernetes/client-node";
import { statusOf } from "./node.ts";

/** The node annotation that says where the kubelet's router listens (empty when it runs none). */
export const serviceRouterAnnotation = "snooze.dev/service-router";

/**
 * The env that points a pod's HTTP clients at the router: both spellings, as programs read one or
 * the other; `direct` (the node's address, where the API server is forwarded) is not proxied.
 * Loopback is never proxied by Go, whatever NO_PROXY says.
 */
export function proxyEnv(url: string, direct: string[]): Record<string, string> {
  const noProxy = ["localhost", "127.0.0.1", ...direct].join(",");
  return {
    HTTP_PROXY: url,
    http_proxy: url,
    // https:// goes through it as CONNECT (Knative's token verifier asks https://kubernetes.default.svc).
    HTTPS_PROXY: url,
    https_proxy: url,
    NO_PROXY: noProxy,
    no_proxy: noProxy,
  };
}

/**
 * What kube-proxy and cluster DNS give a pod's HTTP traffic, as an HTTP forward proxy: a request
 * for `http://<service>.<namespace>.svc[.cluster.local][:port]/...` goes to a ready endpoint of
 * that Service (its port, then the EndpointSlice port of the same name, as kube-proxy matches
 * them; an ExternalName Service is followed to the name it holds); any other address is reached as
 * it is. The Host header stays the one the client sent (Knative's in-memory channel dispatcher
 * tells its channels apart by it). `CONNECT` is routed the same way, for `https://`. The
 * `kubernetes` Service of `default` (port 443) is the API server, as the kubelet forwards it to its pods.
 *
 * A pod's Go programs use it through HTTP_PROXY: net/http's DefaultTransport (and every transport
 * cloned from it, such as Knative Eventing's dispatch client and client-go's) proxies by
 * `http.ProxyFromEnvironment`. Nothing else (UDP, DNS lookups, raw TCP to a cluster IP) is routed.
 */
export interface ServiceRouter {
  /** `http://<host>:<port>`: the value of a pod's HTTP_PROXY. */
  url: string;
  close(): Promise<void>;
}

/** Where a name is reached: a Service's ready endpoint, or the name itself when it is none. */
export interface RoutedTarget {
  host: string;
  port: number;
}

/** A Service name the cluster's DNS would answer for: `<service>.<namespace>.svc[.cluster.local]`. */
const serviceName =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?\.?$/;

/** How many ExternalName Services one lookup follows before it gives up (a loop). */
const maxExternalNameHops = 5;

export class ServiceUnreachable extends Error {}

/**
 * Where `host:port` is reached: for a Service name, a ready endpoint of the Service's port (round
 * robin over the ready ones); for anything else, itself. Throws ServiceUnreachable for a Service
 * name with no such Service, port or ready endpoint (what a client of a real cluster meets as a
 * DNS failure or a refused connection).
 */
export function serviceResolver(
  kc: KubeConfig,
  options: { apiserver?: RoutedTarget } = {},
): (host: string, port: number) => Promise<RoutedTarget> {
  const core = kc.makeApiClient(CoreV1Api);
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  let turn = 0;
  const resolve = async (host: string, port: number, hops: number): Promise<RoutedTarget> => {
    const match = serviceName.exec(host.toLowerCase());
    if (!match) return { host, port };
    const [name, namespace] = [match[1]!, match[3]!];
    // The API server's own Service: its endpoint is where the kubelet forwards the API server to
    // its pods (the test control plane's apiserver, on loopback, publishes no endpoint).
    if (options.apiserver && namespace === "default" && name === "kubernetes" && port === 443)
      return options.apiserver;
    const service = await core.readNamespacedService({ name, namespace }).catch((error: unknown) => {
      if (statusOf(error) === 404) throw new ServiceUnreachable(`no Service ${namespace}/${name}`);
      throw error;
    });
    if (service.spec?.type === "ExternalName") {
      if (hops >= maxExternalNameHops)
        throw new ServiceUnreachable(
          `${namespace}/${name}: more than ${maxExternalNameHops} ExternalName hops`,
        );
      return resolve(service.spec.externalName ?? "", port, hops + 1);
    }
    const servicePort = (service.spec?.ports ?? []).find((p: V1ServicePort) => p.port === port);
    if (!servicePort) throw new ServiceUnreachable(`Service ${namespace}/${name} has no port ${port}`);
    const slices = await discovery.listNamespacedEndpointSlice({
      namespace,
      labelSelector: `kubernetes.io/service-name=${name}`,
    });
    const ready: RoutedTarget[] = [];
    for (const slice of slices.items) {
      const slicePort = (slice.ports ?? []).find((p) => (p.name ?? "") === (servicePort.name ?? ""));
      if (slicePort?.port === undefined) continue;
      for (const endpoint of slice.endpoints ?? [])
        if (endpoint.conditions?.ready !== false)
          for (const address of endpoint.addresses) ready.push({ host: address, port: slicePort.port });
    }
    if (ready.length === 0)
      throw new ServiceUnreachable(`Service ${namespace}/${name} has no ready endpoint for port ${port}`);
    return ready[turn++ % ready.length]!;
  };
  return (host, port) => resolve(host.replace(/^\[|\]$/g, ""), port, 0);
}

/** Headers meant for the proxy, not the server (RFC 9110 §7.6.1, and the proxy's own). */
const hopByHop = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "te",
  "upgrade",
]);

export async function startServiceRouter(
  resolveTarget: (host: string, port: number) => Promise<RoutedTarget>,
  listen: { host: string; port?: number },
): Promise<ServiceRouter> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  };
  // A name the router cannot route (or an API server it cannot ask) is a gateway error to the client.
  const refusal = (error: unknown) => `service router: ${(error as Error).message}\n`;

  const server: Server = createServer(async (req: IncomingMessage, res) => {
    let url: URL;
    try {
      url = new URL(req.url ?? "");
      if (url.protocol !== "http:") throw new Error("not http");
    } catch {
      res
        .writeHead(400, { "content-type": "text/plain" })
        .end("service router: send an absolute http:// URL\n");
      return;
    }
    let target: RoutedTarget;
    try {
      target = await resolveTarget(url.hostname, Number(url.port || 80));
    } catch (error) {
      res.writeHead(502, { "content-type": "text/plain" }).end(refusal(error));
      return;
    }
    const headers: OutgoingHttpHeaders = {};
    for (const [key, value] of Object.entries(req.headers))
      if (!hopByHop.has(key) && value !== undefined) headers[key] = value;
    headers.host = req.headers.host ?? url.host;
    const upstream = request({
      host: target.host,
      port: target.port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers,
    });
    upstream.on("response", (answer) => {
      const out: OutgoingHttpHeaders = {};
      for (const [key, value] of Object.entries(answer.headers))
        if (!hopByHop.has(key) && value !== undefined) out[key] = value;
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
      answer.pipe(res);
    });
    upstream.on("error", (error) => {
      if (!res.headersSent)
        res.writeHead(502, { "content-type": "text/plain" }).end(`service router: ${error.message}\n`);
      else res.destroy();
    });
    res.on("close", () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  });
  server.on("connection", track);
  server.on("connect", async (req: IncomingMessage, client: Socket, head: Buffer) => {
    track(client);
    client.on("error", () => client.destroy());
    const authority = req.url ?? "";
    const colon = authority.lastIndexOf(":");
    let target: RoutedTarget;
    try {
      target = await resolveTarget(authority.slice(0, colon), Number(authority.slice(colon + 1)));
    } catch (error) {
      client.end(`HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\n\r\n${refusal(error)}`);
      return;
    }
    const upstream = connect({ host: target.host, port: target.port });
    track(upstream);
    let tunnelled = false;
    upstream.once("connect", () => {
      tunnelled = true;
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on("error", (error) => {
      // Before the tunnel is up the client still speaks HTTP to the proxy: it hears why.
      if (client.writable && !tunnelled)
        client.end(
          `HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\n\r\nservice router: ${error.message}\n`,
        );
      else client.destroy();
    });
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  server.listen(listen.port ?? 0, listen.host);
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  const host = listen.host.includes(":") ? `[${listen.host}]` : listen.host;
  return {
    url: `http://${host}:${port}`,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
