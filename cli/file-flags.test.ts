import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { freePort } from "../lib/free-port.ts";

/**
 * Every flag that names a file a Kubernetes component reads at start, given what is not a small
 * regular file, in a real `snooze` process: it exits 2 naming the flag and what the path is. Before,
 * a named pipe hung the command for good, deaf to SIGTERM (its handler never ran), and /dev/zero
 * was read on and on (found by an outside tester). A process still running after `limitMs` is killed,
 * so a hang fails the test rather than the run.
 */
const limitMs = 30_000;
let dir: string;
let kinds: Record<string, { path: string; said: string }>;
let port: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "snooze-file-flags-"));
  const fifo = join(dir, "fifo");
  execFileSync("mkfifo", [fifo]);
  const directory = join(dir, "directory");
  mkdirSync(directory);
  const toDevice = join(dir, "to-urandom");
  symlinkSync("/dev/urandom", toDevice);
  // Sparse: 5 GiB on paper, nothing on disk.
  const huge = join(dir, "huge");
  writeFileSync(huge, "");
  truncateSync(huge, 5 * 1024 ** 3);
  kinds = {
    "a named pipe": { path: fifo, said: "it is a named pipe (FIFO), not a regular file" },
    "/dev/zero": { path: "/dev/zero", said: "it is a device, not a regular file" },
    "a directory": { path: directory, said: "it is a directory, not a regular file" },
    "a symbolic link to /dev/urandom": { path: toDevice, said: "it is a device, not a regular file" },
    "a 5 GiB file": { path: huge, said: "the file is 5368709120 bytes; it may be at most 4194304 bytes" },
    "a missing file": { path: join(dir, "missing"), said: "ENOENT" },
  };
  port = await freePort();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function snooze(args: string[]) {
  const run = spawnSync(process.execPath, ["bin/snooze.js", ...args], {
    encoding: "utf8",
    timeout: limitMs,
    killSignal: "SIGKILL",
    env: { ...process.env, KUBECONFIG: "", KUBERNETES_SERVICE_HOST: "" },
  });
  return { status: run.status, stderr: run.stderr };
}

describe.each([
  "a named pipe",
  "/dev/zero",
  "a directory",
  "a symbolic link to /dev/urandom",
  "a 5 GiB file",
  "a missing file",
])("given %s", (kind) => {
  test("autoscaler --kubeconfig exits 2 saying what it is", () => {
    const { path, said } = kinds[kind]!;
    const run = snooze(["autoscaler", "--kubeconfig", path, "--port", String(port)]);
    expect(run.stderr).toContain(`cannot read the kubeconfig ${path}: ${said}`);
    expect(run.status).toBe(2);
  });

  test("autoscaler --grpc-tls-cert exits 2 saying what it is", () => {
    const { path, said } = kinds[kind]!;
    const run = snooze([
      "autoscaler",
      "--grpc-tls-cert",
      path,
      "--grpc-tls-key",
      path,
      "--port",
      String(port),
    ]);
    expect(run.stderr).toContain(`--grpc-tls-cert ${path}: ${said}`);
    expect(run.status).toBe(2);
  });
});

test("activator and webhooks --kubeconfig, --grpc-client-ca, and a file the kubeconfig names: a named pipe is refused by name, exit 2", () => {
  const { path: fifo, said } = kinds["a named pipe"]!;
  for (const command of ["activator", "webhooks"]) {
    const run = snooze([command, "--kubeconfig", fifo, "--port", String(port)]);
    expect(run.stderr, command).toContain(`cannot read the kubeconfig ${fifo}: ${said}`);
    expect(run.status, command).toBe(2);
  }
  const pem = join(dir, "tls.pem");
  writeFileSync(pem, "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n");
  const ca = snooze(["autoscaler", "--grpc-tls-cert", pem, "--grpc-tls-key", pem, "--grpc-client-ca", fifo]);
  expect(ca.stderr).toContain(`--grpc-client-ca ${fifo}: ${said}`);
  expect(ca.status).toBe(2);

  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    [
      "apiVersion: v1",
      "kind: Config",
      "current-context: c",
      "contexts: [{name: c, context: {cluster: k, user: u}}]",
      `clusters: [{name: k, cluster: {server: "https://127.0.0.1:1", certificate-authority: ${fifo}}}]`,
      "users: [{name: u, user: {token: t}}]",
      "",
    ].join("\n"),
  );
  const named = snooze(["autoscaler", "--kubeconfig", kubeconfig, "--port", String(port)]);
  expect(named.stderr).toContain(`cluster "k": cannot read certificate-authority ${fifo}: ${said}`);
  expect(named.status).toBe(2);
});
