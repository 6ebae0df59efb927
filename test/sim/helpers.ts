/**
 * Helpers for the simulator tests: engines started in-process on 127.0.0.1
 * with a tiny time scale and an isolated GPU ledger, closed after each test.
 */
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach } from "vitest";
import type { SimOptions } from "../../hack/sim/options.ts";
import { type SimHandle, type StartSimSettings, startSim } from "../../hack/sim/server.ts";

const open: SimHandle[] = [];
const dirs: string[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((sim) => sim.close()));
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh GPU ledger directory, removed after the test. */
export function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "snooze-sim-test-"));
  dirs.push(dir);
  return dir;
}

/** Defaults for tests: no load time, every other delay ×0.01, sleep API mounted, port chosen by the OS. */
export async function sim(
  options: Partial<SimOptions> = {},
  settings: StartSimSettings = {},
): Promise<SimHandle> {
  const handle = await startSim(
    { port: 0, timeScale: 0.01, loadTimeMs: 0, devMode: true, enableSleepMode: true, ...options },
    settings,
  );
  open.push(handle);
  return handle;
}

/** Registers a handle made elsewhere for closing after the test. */
export function track(handle: SimHandle): SimHandle {
  open.push(handle);
  return handle;
}

export async function post(
  base: string,
  route: string,
  body?: unknown,
  init: RequestInit = {},
): Promise<Response> {
  return fetch(`${base}${route}`, {
    method: "POST",
    headers: body === undefined ? undefined : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    ...init,
  });
}

export async function postJson(
  base: string,
  route: string,
  body?: unknown,
): Promise<{ status: number; json: any }> {
  const response = await post(base, route, body);
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : undefined };
}

export async function getJson(base: string, route: string): Promise<{ status: number; json: any }> {
  const response = await fetch(`${base}${route}`);
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : undefined };
}

/** The `data:` payloads of an SSE body, parsed, with `[DONE]` kept as a string. */
export async function sseEvents(response: Response): Promise<any[]> {
  const text = await response.text();
  return text
    .split("\n\n")
    .filter((block) => block.trim() !== "")
    .map((block) => {
      if (!block.startsWith("data: ")) throw new Error(`not an SSE data line: ${block}`);
      const data = block.slice("data: ".length);
      return data === "[DONE]" ? data : JSON.parse(data);
    });
}

/** One sample of a metric from `/metrics`, by name and exact label text; undefined when absent. */
export async function metric(base: string, name: string, labels?: string): Promise<number | undefined> {
  const text = await (await fetch(`${base}/metrics`)).text();
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    if (labels !== undefined && !line.includes(labels)) continue;
    return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

/** Polls `condition` every 5 ms until it holds; fails after `timeoutMs`. */
export async function waitFor(condition: () => Promise<boolean> | boolean, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; attempt < 10_000; attempt++) {
    if (await condition()) return;
    if (Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`condition not met within ${timeoutMs}ms`);
}

/** Resolves with whether `promise` settled within `ms`; it keeps running either way. */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const settled = promise.then(
    () => true as const,
    () => true as const,
  );
  try {
    return await Promise.race([settled, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export { freePort, freePortRange } from "../../lib/free-port.ts";

/** Whether something accepts TCP connections on the port. */
export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

export const chat = (content: string, extra: Record<string, unknown> = {}) => ({
  messages: [{ role: "user", content }],
  ...extra,
});

/** Reads an SSE response as it arrives, so a test can wait for a given chunk. */
export class SseStream {
  readonly events: any[] = [];
  ended = false;
  private buffer = "";
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private readonly decoder = new TextDecoder();
  private pending: Promise<void> | undefined;
  /** Why reading failed (the connection broke), if it did. */
  error: Error | undefined;

  constructor(response: Response) {
    this.reader = response.body!.getReader();
  }

  /** Content tokens received so far (chat or completion chunks). */
  get tokens(): number {
    return this.events.filter((e) => e !== "[DONE]" && e.choices?.[0] && tokenText(e.choices[0]) !== "")
      .length;
  }

  get finishReason(): string | null | undefined {
    return this.events.find((e) => e !== "[DONE]" && e.choices?.[0]?.finish_reason)?.choices[0].finish_reason;
  }

  /** Reads until `condition` holds or the stream ends; fails after `timeoutMs`. */
  async until(condition: (stream: SseStream) => boolean, timeoutMs = 3_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition(this)) {
      if (this.error) throw this.error;
      if (this.ended) throw new Error(`stream ended first; events: ${JSON.stringify(this.events)}`);
      const left = deadline - Date.now();
      if (left <= 0 || !(await settlesWithin(this.readMore(), left))) {
        throw new Error(
          `stream condition not met within ${timeoutMs}ms; events: ${JSON.stringify(this.events)}`,
        );
      }
    }
  }

  /** The client goes away. */
  async cancel(): Promise<void> {
    await this.reader.cancel();
  }

  /** Reads to the end. */
  async rest(timeoutMs = 3_000): Promise<any[]> {
    await this.until((stream) => stream.ended, timeoutMs);
    if (this.error) throw this.error;
    return this.events;
  }

  /** One read, shared by concurrent callers so no chunk is lost. */
  private readMore(): Promise<void> {
    this.pending ??= this.reader.read().then(
      ({ done, value }) => {
        this.pending = undefined;
        if (done) {
          this.ended = true;
          return;
        }
        this.buffer += this.decoder.decode(value, { stream: true });
        let end = this.buffer.indexOf("\n\n");
        while (end >= 0) {
          const data = this.buffer.slice(0, end).replace(/^data: /, "");
          this.buffer = this.buffer.slice(end + 2);
          this.events.push(data === "[DONE]" ? data : JSON.parse(data));
          end = this.buffer.indexOf("\n\n");
        }
      },
      (error: Error) => {
        this.pending = undefined;
        this.error = error;
        this.ended = true;
      },
    );
    return this.pending;
  }
}

function tokenText(choice: any): string {
  return choice.delta?.content ?? choice.text ?? "";
}
