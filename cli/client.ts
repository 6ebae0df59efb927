import { type Flag, type FlagValues, UsageError } from "../lib/cli-flags.ts";
import { clip, clipMiddle } from "../lib/clip.ts";
import { adminTimeoutMs } from "../lib/control-protocol.ts";
import { formatDuration } from "../lib/duration.ts";
import { printable } from "../lib/printable.ts";
import { redactUrl } from "../lib/redact-url.ts";
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
  // The URL parser refuses a port past 65535 as it refuses a URL that is none: say which it was.
  const port = /^https?:\/\/(?:[^/?#@]*@)?(?:\[[^\]]*\]|[^/?#:[\]]*):(\d+)(?:[/?#]|$)/i.exec(given)?.[1];
  if (!parsed && port !== undefined && Number(port) > 65_535)
    throw new UsageError(
      `${source} has the port ${port}, out of range: a port is 1 to 65535; got ${JSON.stringify(given)}`,
    );
  if (parsed?.protocol !== "http:" && parsed?.protocol !== "https:") {
    // `localhost:8080`, as curl takes it: the scheme left out (found by a probe).
    const meant = `http://${given}`;
    const near = !/^[a-z][a-z\d+.-]*:\/\//i.test(given) && URL.canParse(meant) ? meant : undefined;
    throw new UsageError(
      `${source} must be an http:// or https:// URL, such as ${defaultUrl}; got ${JSON.stringify(given)}${near ? ` (did you mean ${JSON.stringify(near)}?)` : ""}`,
    );
  }
  // Only the origin and path are used: a user and password were dropped without a word, and a
  // proxy that wanted them answered 401 (found by a probe).
  if (parsed.username || parsed.password)
    throw new UsageError(
      `${source} holds a user name or password (${JSON.stringify(redactUrl(given))}), which the commands do not send: Snooze's admin API takes a bearer token (--admin-token-file or $SNOOZE_ADMIN_TOKEN); drop them from the address`,
    );
  if (parsed.search || parsed.hash)
    throw new UsageError(
      `${source} must be Snooze's address alone, without a query (?…) or fragment (#…), such as ${defaultUrl}; got ${JSON.stringify(given)}`,
    );
  const base = `${parsed.origin}${parsed.pathname.replace(/\/+$/, "")}`;
  // The OpenAI base URL clients are given (`OPENAI_BASE_URL=http://127.0.0.1:8080/v1`) is not
  // Snooze's own address: under it every command got a 404 for `/v1/snooze/v1/models`, naming no
  // flag (found by a probe). Snooze serves /v1 itself, so no proxy prefix ends there.
  // Nor is its admin API's (`/snooze/v1`, as the docs name it): told to drop only the /v1, a user
  // got `http://host/snooze` and a 404 for `/snooze/snooze/v1/models` (found by an outside tester).
  // Both readings are offered: `/snooze` may be a proxy's prefix before the OpenAI base URL.
  if (/\/snooze\/v1$/i.test(base))
    throw new UsageError(
      `${source} is Snooze's own address, not its admin API's (the commands add /snooze/v1 themselves) nor the OpenAI base URL its clients use: drop the /snooze/v1 (${base.slice(0, -10) || defaultUrl}), or only the /v1 when a proxy serves Snooze under /snooze (${base.slice(0, -3)}); got ${JSON.stringify(given)}`,
    );
  if (/\/v1$/i.test(base))
    throw new UsageError(
      `${source} is Snooze's own address, not the OpenAI base URL its clients use: drop the /v1 (${base.slice(0, -3) || defaultUrl}); got ${JSON.stringify(given)}`,
    );
  return base;
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

/** OpenSSL's verdicts on a certificate chain that does not lead to a CA Node trusts. */
const untrustedCertificate = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "CERT_UNTRUSTED",
]);

/**
 * Snooze at `url` could not be reached, and why, in words. An https:// address whose server speaks
 * plain HTTP (as `snooze serve` does) was OpenSSL's own two lines, ending in a path inside Node's
 * sources ("...:wrong version number:../deps/openssl/...c:77:", found by an outside tester).
 */
function cannotReach(url: string, error: Error & { code?: string }): ClientError {
  if (error.code === "ERR_SSL_WRONG_VERSION_NUMBER")
    return new ClientError(
      `cannot reach ${url}: the server there does not speak TLS (https://); Snooze serves plain HTTP unless a proxy before it adds TLS: write http://`,
    );
  // A certificate Node does not take: the server is there, so not "is Snooze running?", and Node's
  // hint, a flag of its own, cannot be given through `npx snooze` (found by a probe).
  const reason = error.message.split(";")[0]!.trim();
  if (untrustedCertificate.has(error.code ?? ""))
    return new ClientError(
      `cannot reach ${url}: its TLS certificate is not trusted (${reason}): give Node.js its CA, NODE_EXTRA_CA_CERTS=<ca.pem>, or NODE_OPTIONS=--use-system-ca when the system trusts it`,
    );
  if (error.code === "ERR_TLS_CERT_ALTNAME_INVALID")
    return new ClientError(
      `cannot reach ${url}: its TLS certificate is for another name (${reason}): write a name it holds in --url or SNOOZE_URL`,
    );
  if (error.code === "CERT_HAS_EXPIRED" || error.code === "CERT_NOT_YET_VALID")
    return new ClientError(
      `cannot reach ${url}: its TLS certificate is out of its dates (${reason}): renew it, or check this machine's clock`,
    );
  return new ClientError(
    `cannot reach ${url}: ${error.message.trim()} (is Snooze running? pass --url or set SNOOZE_URL)`,
  );
}

function refusalText(text: string, statusText: string): string {
  let said = "";
  try {
    said = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? "";
  } catch {
    // not JSON
  }
  if (typeof said !== "string" || !said) said = text.trim() || statusText;
  return printable(clipMiddle(said, maxMessageChars));
}

/** The most of a server's message a command prints: its start and its end, the middle cut out. */
const maxMessageChars = 500;

/**
 * How long a call that Snooze answers at once (the model list, an engine's log lines, a wake's ask,
 * the event stream's first event) may take in all, and how long any answer may pause once begun.
 */
export const answerTimeoutMs = 5_000;

/** The most a JSON answer may hold; Snooze's are far smaller (a model list, 10000 log lines). */
export const maxAnswerBytes = 16 * 1024 * 1024;

/** The most one event of the event stream may hold; Snooze's are a few hundred bytes. */
export const maxEventBytes = 1024 * 1024;

/** How long the event stream may send nothing at all: Snooze sends a comment every 15 s. */
export const eventStallMs = 45_000;

const mib = (bytes: number) => `${bytes / 1024 / 1024} MiB`;

/** A request's own time limit (`AbortSignal.timeout`) ran out: something took the connection and said nothing. */
const noAnswer = (target: string) =>
  new ClientError(
    `${target} did not answer in time: whatever listens there took the connection and said nothing (is it Snooze, and is it stuck?)`,
  );

/** An answer begun and not finished: the server stopped sending, or sent too slowly. */
const stoppedAnswering = (target: string, how: string) =>
  new ClientError(`${target} stopped answering: ${how} (is it Snooze, and is it stuck?)`);

const pausedFor = (ms: number) => `it began its answer, then sent nothing for ${formatDuration(ms)}`;

/** A time limit on one request, aborting it (and with it the connection) when it runs out. */
class Deadline {
  private readonly control = new AbortController();
  private readonly timer: NodeJS.Timeout;
  hit = false;
  readonly signal: AbortSignal;
  readonly ms: number;

  constructor(ms: number, outer?: AbortSignal) {
    this.ms = ms;
    this.timer = setTimeout(() => {
      this.hit = true;
      this.control.abort();
    }, ms);
    this.signal = outer ? AbortSignal.any([outer, this.control.signal]) : this.control.signal;
  }

  /** Ends the request now (an answer too large, or one that paused too long). */
  cancel(): void {
    this.control.abort();
  }

  clear(): void {
    clearTimeout(this.timer);
  }
}

/**
 * `body`'s chunks, failing with a ClientError when the server sends nothing for `stallMs()` (read
 * before each chunk) and cancelling the request then.
 */
async function* chunksOf(
  target: string,
  body: AsyncIterable<Uint8Array>,
  stallMs: () => number,
  deadline: Deadline,
): AsyncGenerator<Uint8Array> {
  const iterator = body[Symbol.asyncIterator]();
  for (;;) {
    const ms = stallMs();
    const next = iterator.next();
    next.catch(() => {}); // when the pause wins, the read fails later, as the request is cancelled
    let timer: NodeJS.Timeout | undefined;
    const paused = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        deadline.cancel();
        reject(stoppedAnswering(target, pausedFor(ms)));
      }, ms);
    });
    try {
      const result = await Promise.race([next, paused]);
      if (result.done) return;
      yield result.value;
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * `body` as text: at most `maxAnswerBytes` (else a ClientError saying the answer is larger), with no
 * pause longer than `answerTimeoutMs`.
 */
async function readAnswer(
  target: string,
  body: AsyncIterable<Uint8Array>,
  length: string | null | undefined,
  deadline: Deadline,
): Promise<string> {
  if (Number(length) > maxAnswerBytes) {
    deadline.cancel();
    throw tooLarge(target);
  }
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of chunksOf(target, body, () => answerTimeoutMs, deadline)) {
    size += chunk.byteLength;
    if (size > maxAnswerBytes) {
      deadline.cancel();
      throw tooLarge(target);
    }
    parts.push(chunk);
  }
  return Buffer.concat(parts).toString("utf8");
}

const tooLarge = (target: string) =>
  notSnooze(target, `its answer is larger than ${mib(maxAnswerBytes)}, more than Snooze sends`);

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

  /**
   * Sends a GET within `deadline`; rejects with a ClientError saying what went wrong in words (with
   * a refusal's message, read within the same bounds as any answer).
   */
  private async request(path: string, deadline: Deadline): Promise<Response> {
    const target = String(adminUrl(this.url, path));
    let response: Response;
    try {
      response = await fetch(target, { headers: this.headers, signal: deadline.signal });
    } catch (error) {
      if (deadline.hit) throw noAnswer(target);
      if (deadline.signal.aborted) throw error; // the command's own signal
      throw cannotReach(this.url, ((error as Error).cause as Error | undefined) ?? (error as Error));
    }
    if (!response.ok) {
      const text = await this.text(target, response.body, response.headers.get("content-length"), deadline);
      throw new ClientError(
        `${target} answered ${response.status}: ${refusalText(text, response.statusText)}`,
      );
    }
    return response;
  }

  /** An answer's body as text, within the bounds of `readAnswer` and `deadline`; why not, in words. */
  private async text(
    target: string,
    body: AsyncIterable<Uint8Array> | null,
    length: string | null | undefined,
    deadline: Deadline,
  ): Promise<string> {
    try {
      return await readAnswer(target, body ?? (async function* () {})(), length, deadline);
    } catch (error) {
      if (error instanceof ClientError) throw error;
      if (deadline.hit)
        throw stoppedAnswering(target, `its answer did not end within ${formatDuration(deadline.ms)}`);
      if (deadline.signal.aborted) throw error; // the command's own signal
      // The server went away mid-answer (undici says "terminated", its cause the socket's end).
      const cause = (error as Error & { cause?: Error }).cause;
      throw new ClientError(
        `lost the connection to ${this.url}: ${cause?.message ?? (error as Error).message} (did Snooze stop?)`,
      );
    }
  }

  /**
   * A wake, sleep or stop: a POST. A sleep or stop is answered once the action is done, which may
   * take as long as the server's own bound for it (`adminTimeoutMs`, 10 minutes) where fetch gives
   * up on an answer's headers after 300 s: sent with undici's request API and no headers timeout,
   * given that long in all (`quick`, a wake's ask, answered at once: `answerTimeoutMs`). Once the
   * answer begins it may not pause longer than `answerTimeoutMs`. Resolves with the JSON answer,
   * rejects with a ClientError saying what went wrong in words.
   */
  async action<T>(path: string, shape: Shape, signal?: AbortSignal, quick = false): Promise<T> {
    const target = String(adminUrl(this.url, path));
    const url = new URL(target);
    const { Agent } = (await import("../lib/undici.ts")).undici();
    const agent = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
    const deadline = new Deadline(quick ? answerTimeoutMs : adminTimeoutMs + 30_000, signal);
    try {
      let answer: Awaited<ReturnType<typeof agent.request>>;
      try {
        answer = await agent.request({
          origin: url.origin,
          path: `${url.pathname}${url.search}`,
          method: "POST",
          headers: this.headers,
          signal: deadline.signal,
        });
      } catch (error) {
        if (deadline.hit) throw noAnswer(target);
        if (signal?.aborted) throw error;
        throw cannotReach(this.url, error as Error);
      }
      const length = answer.headers["content-length"];
      const text = await this.text(target, answer.body, typeof length === "string" ? length : null, deadline);
      if (answer.statusCode < 200 || answer.statusCode >= 300)
        throw new ClientError(
          `${target} answered ${answer.statusCode}: ${refusalText(text, String(answer.statusCode))}`,
        );
      return answerOf<T>(target, text, shape);
    } finally {
      deadline.clear();
      void agent.destroy().catch(() => {});
    }
  }

  /**
   * A GET whose answer is JSON of the `shape` the command reads, given `answerTimeoutMs` in all;
   * rejects with a ClientError otherwise.
   */
  async json<T>(path: string, shape: Shape, init: { signal?: AbortSignal } = {}): Promise<T> {
    const deadline = new Deadline(answerTimeoutMs, init.signal);
    try {
      const response = await this.request(path, deadline);
      const text = await this.text(
        response.url,
        response.body,
        response.headers.get("content-length"),
        deadline,
      );
      return answerOf<T>(response.url, text, shape);
    } finally {
      deadline.clear();
    }
  }

  /**
   * Reads a server-sent event stream, calling `onEvent` for each event until it returns true (done),
   * the stream ends or `signal` aborts. Resolves true when `onEvent` said done. An answer that is
   * not an event stream, an event whose data is not JSON or is larger than `maxEventBytes`, a
   * stream whose first event takes longer than `answerTimeoutMs` or that is silent longer than
   * `eventStallMs` after it, or a ClientError from `onEvent` (an event of the wrong shape), rejects.
   */
  async events(
    path: string,
    onEvent: (type: string, data: unknown) => boolean | undefined,
    signal: AbortSignal,
  ): Promise<boolean> {
    const deadline = new Deadline(answerTimeoutMs, signal);
    let response: Response;
    try {
      response = await this.request(path, deadline);
    } finally {
      deadline.clear();
    }
    const target = response.url;
    const type = response.headers.get("content-type") ?? "";
    if (!/^text\/event-stream\b/i.test(type)) {
      deadline.cancel();
      throw notSnooze(
        target,
        `its event stream is ${type ? JSON.stringify(clip(type, 60)) : "of no content type"}, not text/event-stream`,
      );
    }
    const decoder = new TextDecoder();
    let buffer = "";
    let began = false;
    const stallMs = () => (began ? eventStallMs : answerTimeoutMs);
    try {
      for await (const chunk of chunksOf(
        target,
        response.body ?? (async function* () {})(),
        stallMs,
        deadline,
      )) {
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
          if (!data) continue;
          began = true;
          if (onEvent(type, answerOf(target, data, anything))) return true;
        }
        // What is left is one event not yet ended: at most maxEventBytes (a character is a byte or more).
        if (buffer.length > maxEventBytes) {
          deadline.cancel();
          throw notSnooze(
            target,
            `its event stream sent an event larger than ${mib(maxEventBytes)}, more than Snooze sends`,
          );
        }
      }
    } catch (error) {
      if (error instanceof ClientError) throw error;
      if (signal.aborted) return false;
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
  const model = positionals[0]!;
  // `snooze wake "$MODEL"` with MODEL unset: before, the server's list was read and the answer was
  // `no model named ; did you mean q?`, a name no one typed.
  if (model === "")
    throw new UsageError(`the model's name is empty: name the model, e.g. \`snooze ${name} qwen\``);
  return model;
}
