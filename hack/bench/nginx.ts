/**
 * nginx as the proxy yardstick (and as a do-nothing engine): writes a config
 * into a scratch directory, runs nginx in the foreground, and knows its
 * process ids so its CPU can be measured like the activator's.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { waitForPort } from "./ports.ts";
import { childrenOf } from "./proc.ts";

export interface NginxProxyConfig {
  /** `auto` is one worker per core, nginx's own recommendation. */
  workers: number | "auto";
  port: number;
  /** host:port of the engine. */
  upstream: string;
}

export interface NginxStaticConfig {
  port: number;
  /** What every POST answers with (application/json). */
  body: string;
}

/** Settings shared by both roles: foreground, no access log, scratch paths, long keep-alive. */
function common(dir: string, workers: number | "auto", server: string): string {
  const scratch = (name: string) => join(dir, name);
  return `daemon off;
master_process on;
worker_processes ${workers};
worker_rlimit_nofile 65536;
pid ${scratch("nginx.pid")};
error_log ${scratch("error.log")} warn;
events { worker_connections 16384; multi_accept on; }
http {
  access_log off;
  client_body_temp_path ${scratch("client_body")};
  proxy_temp_path ${scratch("proxy")};
  fastcgi_temp_path ${scratch("fastcgi")};
  uwsgi_temp_path ${scratch("uwsgi")};
  scgi_temp_path ${scratch("scgi")};
  keepalive_requests 10000000;
  keepalive_timeout 65s;
  client_max_body_size 32m;
${server}
}
`;
}

/**
 * A reverse proxy configured as one would put nginx in front of an LLM server:
 * HTTP/1.1 keep-alive pool to the engine, response buffering off (SSE must flow
 * token by token), long read timeouts.
 */
export function nginxProxyConfig(dir: string, config: NginxProxyConfig): string {
  return common(
    dir,
    config.workers,
    `  upstream engine {
    server ${config.upstream};
    keepalive 1024;
    keepalive_requests 10000000;
  }
  server {
    listen 127.0.0.1:${config.port} backlog=8192;
    location / {
      proxy_pass http://engine;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 1h;
      proxy_send_timeout 1h;
    }
  }`,
  );
}

/** nginx answering every request itself: the cheapest engine stand-in there is. */
export function nginxStaticConfig(dir: string, config: NginxStaticConfig): string {
  const body = config.body.replaceAll("\\", "\\\\").replaceAll("'", "\\'");
  return common(
    dir,
    1,
    `  server {
    listen 127.0.0.1:${config.port} backlog=8192;
    default_type application/json;
    location = /health { return 200; }
    location = /is_sleeping { return 200 '{"is_sleeping":false}'; }
    location / { return 200 '${body}'; }
  }`,
  );
}

/** Writes `text` as `<dir>/nginx.conf` and returns the argv that runs it in the foreground. */
export function nginxCommand(dir: string, text: string): string[] {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "nginx.conf");
  writeFileSync(file, text);
  return ["nginx", "-p", dir, "-c", file, "-e", join(dir, "error.log")];
}

export interface RunningNginx {
  /** The master process id. */
  pid: number;
  /** Master and workers: what a CPU meter should sum. */
  pids(): number[];
  stop(): Promise<void>;
}

/** Starts nginx with `text` as its config and waits until it listens on `port`. */
export async function startNginx(dir: string, text: string, port: number): Promise<RunningNginx> {
  const [file, ...args] = nginxCommand(dir, text);
  const child: ChildProcess = spawn(file!, args, { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, "exit");
  try {
    await waitForPort(port, 10_000, () => child.exitCode !== null);
  } catch (error) {
    child.kill("SIGKILL");
    let log = "";
    try {
      log = readFileSync(join(dir, "error.log"), "utf8").slice(-2000);
    } catch {}
    throw new Error(`nginx did not start: ${(error as Error).message}\n${stderr}${log}`);
  }
  const pid = child.pid!;
  return {
    pid,
    pids: () => [pid, ...childrenOf(pid)],
    async stop() {
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      const killer = delay(5_000).then(() => child.kill("SIGKILL"));
      await Promise.race([exited, killer]);
      await exited;
    },
  };
}
