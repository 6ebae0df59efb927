import { execFileSync } from "node:child_process";
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { createLogger, silentLogger } from "../../lib/log.ts";
import type { TlsPair } from "../server.ts";
import { FileCertificates, SelfManagedCertificates } from "./sources.ts";

let dir: string | undefined;
let source: FileCertificates | undefined;

afterEach(async () => {
  source?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

test("certificate files (cert-manager's Secret) are read again and a changed pair is handed over", async () => {
  dir = await mkdtemp(join(tmpdir(), "snooze-certs-"));
  const certPath = join(dir, "tls.crt");
  const keyPath = join(dir, "tls.key");
  await writeFile(certPath, "cert-1");
  await writeFile(keyPath, "key-1");
  source = new FileCertificates({ certPath, keyPath, reloadMs: 20, log: silentLogger });
  expect(await source.initial()).toEqual({ certPem: "cert-1", keyPem: "key-1" });
  const changes: TlsPair[] = [];
  let changed: () => void = () => {};
  const next = new Promise<void>((resolve) => (changed = resolve));
  source.watch((tls) => {
    changes.push(tls);
    changed();
  });
  // A file that is briefly missing (the Secret volume swaps a symlink) keeps the current pair.
  await rm(keyPath);
  await new Promise((resolve) => setTimeout(resolve, 60));
  expect(changes).toEqual([]);
  // A file opened for writing and not yet written is empty: not handed over (a poll between the two
  // steps of writeFile read the key as "": a test failed so now and then under load).
  await writeFile(keyPath, "");
  await writeFile(certPath, "cert-2");
  await new Promise((resolve) => setTimeout(resolve, 60));
  expect(changes).toEqual([]);
  await writeFile(keyPath, "key-2");
  await next;
  expect(changes).toEqual([{ certPem: "cert-2", keyPem: "key-2" }]);
});

test("--tls-cert or --tls-key that is a named pipe or a device is refused by what it is, at start and at a reload, and the current pair is kept", async () => {
  // Found by an outside tester: read with readFile, a named pipe kept the start waiting for good
  // (and, once swapped in, a thread of libuv's pool at every reload), and /dev/zero was read on and on.
  dir = await mkdtemp(join(tmpdir(), "snooze-certs-"));
  const certPath = join(dir, "tls.crt");
  const keyPath = join(dir, "tls.key");
  execFileSync("mkfifo", [certPath]);
  await writeFile(keyPath, "key-1");
  const refused = new FileCertificates({ certPath, keyPath, reloadMs: 20, log: silentLogger });
  await expect(refused.initial()).rejects.toThrow(
    `cannot read --tls-cert ${certPath}: it is a named pipe (FIFO), not a regular file`,
  );
  const device = new FileCertificates({
    certPath: join(dir, "tls.crt.ok"),
    keyPath: "/dev/zero",
    reloadMs: 20,
    log: silentLogger,
  });
  await writeFile(join(dir, "tls.crt.ok"), "cert-1");
  await expect(device.initial()).rejects.toThrow(
    "cannot read --tls-key /dev/zero: it is a device, not a regular file",
  );

  await rm(certPath);
  await writeFile(certPath, "cert-1");
  const warnings: string[] = [];
  let warned: () => void = () => {};
  const warning = new Promise<void>((resolve) => (warned = resolve));
  const log = createLogger({}, (line) => {
    const record = JSON.parse(line) as { level: string; error?: string };
    if (record.level !== "warn") return;
    warnings.push(String(record.error));
    warned();
  });
  source = new FileCertificates({ certPath, keyPath, reloadMs: 20, log });
  expect(await source.initial()).toEqual({ certPem: "cert-1", keyPem: "key-1" });
  const changes: TlsPair[] = [];
  source.watch((tls) => changes.push(tls));
  // Swapped in at once, as a Secret volume swaps its files: removed first, a poll in between read
  // a missing file, and its warning said ENOENT (one CI run in many).
  const fifo = join(dir, "tls.crt.fifo");
  execFileSync("mkfifo", [fifo]);
  await rename(fifo, certPath);
  await warning;
  expect(warnings[0]).toContain(
    `cannot read --tls-cert ${certPath}: it is a named pipe (FIFO), not a regular file`,
  );
  expect(changes).toEqual([]);
});

test("a certificate setup that fails says why: the error's cause (a refused connection, an untrusted server) is logged", async () => {
  // Before, the error was logged as a string: `TypeError: fetch failed`, and nothing of why.
  const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6443"), { code: "ECONNREFUSED" });
  const failing = () => Promise.reject(new TypeError("fetch failed", { cause: refused }));
  const warnings: unknown[] = [];
  const stop = new AbortController();
  const log = createLogger({}, (line) => {
    const record = JSON.parse(line) as { level: string; error?: unknown };
    if (record.level !== "warn") return;
    warnings.push(record.error);
    stop.abort();
  });
  const self = new SelfManagedCertificates({
    client: { get: failing, create: failing, replace: failing },
    namespace: "snooze-system",
    secretName: "snooze-webhook-certs",
    policy: { caValidityMs: 3_600_000, certValidityMs: 600_000, hosts: ["snooze-webhooks"] },
    log,
    resyncMs: 60_000,
  });
  await expect(self.initial(stop.signal)).rejects.toThrow("stopped before the certificates were ready");
  self.stop();
  expect(warnings[0]).toMatchObject({
    name: "TypeError",
    message: "fetch failed",
    cause: { message: "connect ECONNREFUSED 127.0.0.1:6443", code: "ECONNREFUSED" },
  });
});
