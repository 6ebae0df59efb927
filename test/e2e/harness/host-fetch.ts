import { Readable } from "node:stream";
import { type Dispatcher, request } from "undici";

/**
 * A `fetch` that sends every request to `target` (the activator's address) with the Host header
 * of the URL it was given, as a DNS name pointing at Knative's ingress would. fetch itself may not
 * set Host (it is a forbidden header, silently replaced), so this speaks through undici's
 * `request`; the answer streams back as a standard Response. For the `openai` client's `fetch`
 * option: `new OpenAI({ baseURL: ksvcUrl + "/v1", fetch: fetchVia(activator) })`.
 */
export function fetchVia(target: string): typeof fetch {
  const base = new URL(target);
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const headers = new Headers(input instanceof Request ? input.headers : undefined);
    for (const [name, value] of new Headers(init?.headers)) headers.set(name, value);
    headers.set("host", url.host);
    const method = init?.method ?? (input instanceof Request ? input.method : "GET");
    const body = init?.body ?? (input instanceof Request ? input.body : undefined);
    const answer = await request(`${base.origin}${url.pathname}${url.search}`, {
      method: method as Dispatcher.HttpMethod,
      headers: Object.fromEntries(headers),
      body:
        body === null || body === undefined ? undefined : typeof body === "string" ? body : (body as never),
      signal: init?.signal ?? undefined,
    });
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (Array.isArray(value)) for (const v of value) responseHeaders.append(name, v);
      else if (value !== undefined) responseHeaders.set(name, value);
    }
    const empty = answer.statusCode === 204 || answer.statusCode === 304 || method === "HEAD";
    return new Response(empty ? null : (Readable.toWeb(answer.body) as ReadableStream), {
      status: answer.statusCode,
      headers: responseHeaders,
    });
  };
}
