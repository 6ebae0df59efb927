import { type Flag, type FlagValues, UsageError } from "../lib/cli-flags.ts";
import { adminTimeoutMs } from "../lib/control-protocol.ts";
import { adminHeaders, adminTokenFlags, adminTokenFrom } from "./admin-token.ts";

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

/** The activator's base URL: `--url`, else `$SNOOZE_URL`, else the local default. */
export function serverUrl(values: FlagValues, env: Record<string, string | undefined> = process.env): string {
  const given = typeof values.url === "string" ? values.url : env.SNOOZE_URL?.trim() || defaultUrl;
  // A usage mistake (exit 2), not a Snooze that cannot be reached.
  const parsed = URL.canParse(given) ? new URL(given) : undefined;
  if (parsed?.protocol !== "http:" && parsed?.protocol !== "https:")
    throw new UsageError(
      `${typeof values.url === "string" ? "--url" : "SNOOZE_URL"} must be an http:// or https:// URL, such as ${defaultUrl}; got ${JSON.stringify(given)}`,
    );
  return given.replace(/\/+$/, "");
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
    const target = `${this.url}${path}`;
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
  async action<T>(path: string, signal?: AbortSignal): Promise<T> {
    const target = new URL(`${this.url}${path}`);
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
      return JSON.parse(text) as T;
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

  async json<T>(path: string, init: RequestInit = {}): Promise<T> {
    const response = await this.request(path, init);
    try {
      return (await response.json()) as T;
    } catch (error) {
      if ((error as Error).name === "TimeoutError") throw noAnswer(`${this.url}${path}`);
      throw error;
    }
  }

  /**
   * Reads a server-sent event stream, calling `onEvent` for each event until it returns true (done),
   * the stream ends or `signal` aborts. Resolves true when `onEvent` said done.
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
          if (data && onEvent(type, JSON.parse(data))) return true;
        }
      }
    } catch (error) {
      if (signal.aborted) return false;
      if (error instanceof SyntaxError) throw error;
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
