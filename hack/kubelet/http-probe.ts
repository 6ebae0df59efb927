import { request } from "node:http";
import { request as tlsRequest } from "node:https";

export type ProbeResult = { ok: true } | { ok: false; reason: string };

/**
 * One HTTP GET probe, like the kubelet's httpGet probe: a new connection each time, closed after
 * (no keep-alive pool that could hold a socket to a process that is gone), success on 200–399.
 * `HTTPS` (a probe's `scheme`) speaks TLS without checking the certificate, as the kubelet does:
 * a webhook's serving certificate names its Service, not the pod's address.
 */
export function httpProbe(
  host: string,
  port: number,
  path: string,
  timeoutMs: number,
  headers: Record<string, string> = {},
  scheme: "HTTP" | "HTTPS" = "HTTP",
): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const req = (scheme === "HTTPS" ? tlsRequest : request)(
      // As the kubelet: its User-Agent (kube-probe/..., by which Knative's queue-proxy tells a probe
      // from a request), then the probe's own headers, which may replace it.
      {
        host,
        port,
        path,
        method: "GET",
        agent: false,
        rejectUnauthorized: false,
        headers: { "user-agent": "kube-probe/stand-in", ...lower(headers), connection: "close" },
      },
      (res) => {
        res.resume();
        const status = res.statusCode ?? 0;
        resolve(status >= 200 && status < 400 ? { ok: true } : { ok: false, reason: `HTTP ${status}` });
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer in ${timeoutMs}ms`)));
    req.once("error", (error) => resolve({ ok: false, reason: error.message }));
    req.end();
  });
}

const lower = (headers: Record<string, string>) =>
  Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
