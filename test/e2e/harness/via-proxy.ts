import { request } from "node:http";

/** An answer read whole: status, headers and body as text. */
export interface ProxiedAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * An HTTP request for `url` sent to the forward proxy at `proxy` as Go's net/http sends one when
 * HTTP_PROXY is set: absolute-form request target, the URL's authority as Host.
 */
export function viaProxy(
  proxy: string,
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<ProxiedAnswer> {
  const at = new URL(proxy);
  return new Promise((resolve, reject) => {
    const req = request({
      host: at.hostname,
      port: Number(at.port),
      method: init.method ?? "GET",
      path: url,
      headers: { host: new URL(url).host, ...init.headers },
    });
    req.on("response", (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(init.body);
  });
}
