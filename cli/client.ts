import { type Flag, type FlagValues, UsageError } from "../lib/cli-flags.ts";
import { clip } from "../lib/clip.ts";
import { adminTimeoutMs } from "../lib/control-protocol.ts";
import { adminHeaders, adminTokenFlags, adminTokenFrom } from "./admin-token.ts";
import type { Shape } from "./answer-shapes.ts";

/** Where the client commands find Snooze when neither `--url` nor `$SNOOZE_URL` says. */
export const defaultUrl = "http://127.0.0.1:8080";

/** `--url` and the admin token, for every command that talks to a running Snooze. */
export const clientFlags: Record<string, Flag> = {
  url: {
    type: "string",
    description: `the activator's address (default: $SNOOZE_URL, else ${defaultUrl})`,
    placeholder: "url",
  },
  ...adminTokenFlags,
};

/**
 * The activator's base URL: `--url`, else `$SNOOZE_URL`, else the local default; without a trailing
 * slash. A path is kept as a prefix (Snooze behind a reverse proxy at `http://host/snooze`); a query
 * or fragment is refused, as the commands' own paths and queries could not go after it.
 */
export function serverUrl(values: FlagValues, env: Record<string, string | undefined> = process.env): string {
  const given = typeof values.url === "string" ? values.url : env.SNOOZE_URL?.trim() || defaultUrl;
  const source = typeof values.url === "string" ? "--url" : "SNOOZE_URL";
  // A usage mistake (exit 2), not a Snooze that cannot be reached.
  const parsed = URL.canParse(given) ? new URL(given) : undefined;
  if (parsed?.protocol !== "http:" && parsed?.protocol !== "https:")
    throw new UsageError(
      `${source} must be an http:// or https:// URL, such as ${defaultUrl}; got ${JSON.stringify(given)}`,
    );
  if (parsed.search || parsed.hash)
    throw new UsageError(
      `${source} must be Snooze's address alone, without a query (?…) or fragment (#…), such as ${defaultUrl}; got ${JSON.stringify(given)}`,
    );
  return `${parsed.origin}${parsed.pathname.replace(/\/+$/, "")}`;
}

/** An admin API `path` (with its query) under the base URL, after the base's own path prefix. */
export function adminUrl(base: string, path: string): URL {
  const url = new URL(base);
  const { pathname, search } = new URL(path, url.origin);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}${pathname}`;
  url.search = search;
  return url;
}

/** A request to Snooze that did not work: printed after the command's name, exit code 1. */
export class ClientError extends Error {}

/** What the admin API says when it refuses: its OpenAI-shaped message, else the raw body. */
async function refusal(response: Response): Promise<string> {
  return refusalText(await response.text().catch(() => ""), response.statusText);
}

function refusalText(text: string, statusText: string): string {
  try {
    const message = (JSON.parse(text) as { error?: { message?: string } }).error?.message;
    if (message) return message;
  } catch {
    // not JSON
  }
  return text.trim() || statusText;
}

/** A request's own time limit (`AbortSignal.timeout`) ran out: something took the connection and said nothing. */
const noAnswer = (target: string) =>
  new ClientError(
    `${target} did not answer in time: whatever listens there took the connection and said nothing (is it Snooze, and is it stuck?)`,
  );

/**
 * Something answered that is not Snooze's admin API (a proxy's or another service's page, a `{}`):
 * said with what was wrong, exit 1 as for a Snooze that cannot be reached.
 */
export const notSnooze = (target: string, problem: string) =>
  new ClientError(
    `${target} did not answer as Snooze does: ${problem} (is Snooze at that address? pass --url or set SNOOZE_URL)`,
  );

/** `value` if it has the `shape` the command reads, else a ClientError saying how it does not. */
export function checked<T>(target: string, value: unknown, shape: Shape): T {
  const problem = shape(value, "");
  if (problem) throw notSnooze(target, problem);
  return value as T;
}

/** Any JSON: what an event's data must be at least (its reader checks the rest). */
const anything: Shape = () => undefined;

/** `text` as JSON of the `shape` the command reads, else a ClientError saying how it is not. */
function answerOf<T>(target: string, text: string, shape: Shape): T {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw notSnooze(target, `its answer is not JSON: ${JSON.stringify(clip(text.trim(), 60))}`);
  }
  return checked<T>(target, value, shape);
}

/** The admin API of one running Snooze, with the admin token when one is set. */
export class AdminClient {
  readonly url: string;
  private readonly headers: Record<string, string>;

  constructor(values: FlagValues, env: Record<string, string | undefined> = process.env) {
    this.url = serverUrl(values, env);
    this.headers = adminHeaders(adminTokenFrom(values, env));
  }

  /** Sends a request; rejects with a ClientError saying what went wrong in words. */
  async request(path: string, init: RequestInit = {}): Promise<Response> {
    const target = String(adminUrl(this.url, path));
    let response: Response;
    try {
      response = await fetch(target, { ...init, headers: { ...this.headers, ...init.headers } });
    } catch (error) {
      if ((error as Error).name === "AbortError") throw error;
      if ((error as Error).name === "TimeoutError") throw noAnswer(target);
      const cause = (error as Error).cause as Error | undefined;
      throw new ClientError(
        `cannot reach ${this.url}: ${cause?.message ?? (error as Error).message} (is Snooze running? pass --url or set SNOOZE_URL)`,
      );
    }
    if (!response.ok)
      throw new ClientError(`${target} answered ${response.status}: ${await refusal(response)}`);
    return response;
  }

  /**
   * A wake, sleep or stop: a POST answered once the action is done, which may take as long as the
   * server's own bound for it (`adminTimeoutMs`, 10 minutes) where fetch gives up on an answer's
   * headers after 300 s. Sent with undici's request API and no headers timeout; resolves with the
   * JSON answer, rejects with a ClientError saying what went wrong in words.
   */
  async action<T>(path: string, shape: Shape, signal?: AbortSignal): Promise<T> {
    const target = adminUrl(this.url, path);
    const { Agent } = await import("../lib/undici.ts");
    const agent = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
    const deadline = AbortSignal.timeout(adminTimeoutMs + 30_000);
    try {
      const { statusCode, body } = await agent.request({
        origin: target.origin,
        path: `${target.pathname}${target.search}`,
        method: "POST",
        headers: this.headers,
        signal: signal ? AbortSignal.any([signal, deadline]) : deadline,
      });
      const text = await body.text();
      if (statusCode < 200 || statusCode >= 300)
        throw new ClientError(`${target} answered ${statusCode}: ${refusalText(text, String(statusCode))}`);
      return answerOf<T>(String(target), text, shape);
    } catch (error) {
      if (error instanceof ClientError || signal?.aborted) throw error;
      if (deadline.aborted) throw noAnswer(String(target));
      throw new ClientError(
        `cannot reach ${this.url}: ${(error as Error).message} (is Snooze running? pass --url or set SNOOZE_URL)`,
      );
    } finally {
      void agent.close().catch(() => {});
    }
  }

  /** A GET whose answer is JSON of the `shape` the command reads; rejects with a ClientError otherwise. */
  async json<T>(path: string, shape: Shape, init: RequestInit = {}): Promise<T> {
    const response = await this.request(path, init);
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      if ((error as Error).name === "AbortError") throw error;
      if ((error as Error).name === "TimeoutError") throw noAnswer(response.url);
      // The server went away mid-answer (undici says "terminated", its cause the socket's end).
      const cause = (error as Error & { cause?: Error }).cause;
      throw new ClientError(
        `lost the connection to ${this.url}: ${cause?.message ?? (error as Error).message} (did Snooze stop?)`,
      );
    }
    return answerOf<T>(response.url, text, shape);
  }

  /**
   * Reads a server-sent event stream, calling `onEvent` for each event until it returns true (done),
   * the stream ends or `signal` aborts. Resolves true when `onEvent` said done. An event whose data
   * is not JSON, or a ClientError from `onEvent` (an event of the wrong shape), rejects with it.
   */
  async events(
    path: string,
    onEvent: (type: string, data: unknown) => boolean | undefined,
    signal: AbortSignal,
  ): Promise<boolean> {
    const response = await this.request(path, { signal });
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut = buffer.indexOf("\n\n");
        while (cut >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          cut = buffer.indexOf("\n\n");
          let type = "message";
          let data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) type = line.slice(6).trim();
            else if (line.startsWith("data:")) data += line.slice(5).trim();
          }
          if (data && onEvent(type, answerOf(response.url, data, anything))) return true;
        }
      }
    } catch (error) {
      if (signal.aborted) return false;
      if (error instanceof ClientError) throw error;
      // The server went away mid-stream (undici says "terminated", its cause the socket's end).
      const cause = (error as Error & { cause?: Error }).cause;
      throw new ClientError(
        `lost the connection to ${this.url}: ${cause?.message ?? (error as Error).message} (did Snooze stop?)`,
      );
    }
    return false;
  }
}

/** Runs a client command's body: a ClientError is printed as `snooze <name>: <message>` with exit 1. */
export async function runClient(name: string, body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof ClientError) {
      console.error(`snooze ${name}: ${error.message}`);
      return 1;
    }
    throw error;
  }
}

/** The one model a command acts on: exactly one positional argument. */
export function modelArgument(name: string, positionals: string[]): string {
  if (positionals.length !== 1)
    throw new UsageError(
      positionals.length === 0 ? `name the model, e.g. \`snooze ${name} qwen\`` : "name one model",
    );
  return positionals[0]!;
}
