import { execFileSync } from "node:child_process";
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { createLogger, silentLogger } from "../../lib/log.ts";
import type { TlsPair } from "../server.ts";
import { FileCertificates, SelfManagedCertificates } from "./sources.ts";
import { createCA } from "./x509.ts";

let dir: string | undefined;
let source: FileCertificates | undefined;

afterEach(async () => {
  source?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Two self-signed pairs (a CA's certificate and key serve as well as any): a and b. */
const pairs = (async () => {
  const validity = { notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 3_600_000) };
  return { a: await createCA("a", validity), b: await createCA("b", validity) };
})();

/** A logger whose warnings land in `warnings`; `next()` resolves at the next one. */
function warningLog() {
  const warnings: string[] = [];
  let warned: () => void = () => {};
  const log = createLogger({}, (line) => {
    const record = JSON.parse(line) as { level: string; error?: string };
    if (record.level !== "warn") return;
    warnings.push(String(record.error));
    warned();
  });
  const next = () => new Promise<void>((resolve) => (warned = resolve));
  return { log, warnings, next };
}

test("certificate files (cert-manager's Secret) are read again and a changed pair is handed over", async () => {
  const { a, b } = await pairs;
  dir = await mkdtemp(join(tmpdir(), "snooze-certs-"));
  const certPath = join(dir, "tls.crt");
  const keyPath = join(dir, "tls.key");
  await writeFile(certPath, a.certPem);
  await writeFile(keyPath, a.keyPem);
  source = new FileCertificates({ certPath, keyPath, reloadMs: 20, log: silentLogger });
  expect(await source.initial(new AbortController().signal)).toEqual(a);
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
  await writeFile(certPath, b.certPem);
  await new Promise((resolve) => setTimeout(resolve, 60));
  expect(changes).toEqual([]);
  await writeFile(keyPath, b.keyPem);
  await next;
  expect(changes).toEqual([b]);
});

test("--tls-cert or --tls-key that is a named pipe or a device is refused by what it is, at start and at a reload, and the current pair is kept", async () => {
  // Found by an outside tester: read with readFile, a named pipe kept the start waiting for good
  // (and, once swapped in, a thread of libuv's pool at every reload), and /dev/zero was read on and on.
  const { a } = await pairs;
  dir = await mkdtemp(join(tmpdir(), "snooze-certs-"));
  const certPath = join(dir, "tls.crt");
  const keyPath = join(dir, "tls.key");
  execFileSync("mkfifo", [certPath]);
  await writeFile(keyPath, a.keyPem);
  const atStart = warningLog();
  const stop = new AbortController();
  const device = new FileCertificates({ certPath, keyPath: "/dev/zero", reloadMs: 20, log: atStart.log });
  const warned = atStart.next();
  const starting = device.initial(stop.signal);
  await warned;
  stop.abort();
  await expect(starting).rejects.toThrow("stopped before the certificates were ready");
  expect(atStart.warnings).toEqual([
    `cannot read --tls-cert ${certPath}: it is a named pipe (FIFO), not a regular file`,
  ]);

  await rm(certPath);
  await writeFile(certPath, a.certPem);
  const reload = warningLog();
  source = new FileCertificates({ certPath, keyPath, reloadMs: 20, log: reload.log });
  expect(await source.initial(new AbortController().signal)).toEqual(a);
  const changes: TlsPair[] = [];
  source.watch((tls) => changes.push(tls));
  const warning = reload.next();
  // Swapped in at once, as a Secret volume swaps its files: removed first, a poll in between read
  // a missing file, and its warning said ENOENT (one CI run in many).
  const fifo = join(dir, "tls.crt.fifo");
  execFileSync("mkfifo", [fifo]);
  await rename(fifo, certPath);
  await warning;
  expect(reload.warnings[0]).toContain(
    `cannot read --tls-cert ${certPath}: it is a named pipe (FIFO), not a regular file`,
  );
  expect(changes).toEqual([]);
});

test("a certificate and key that are not a pair: unready until they are, said once; at a reload the current pair is kept", async () => {
  // Found by an outside tester: a mismatched pair at start (or a file not there yet) left the
  // webhooks unready for good ("could not get ready … key values mismatch"), the files never read
  // again once fixed, and the message named neither flag.
  const { a, b } = await pairs;
  dir = await mkdtemp(join(tmpdir(), "snooze-certs-"));
  const certPath = join(dir, "tls.crt");
  const keyPath = join(dir, "tls.key");
  await writeFile(certPath, a.certPem);
  await writeFile(keyPath, b.keyPem);
  const { log, warnings, next } = warningLog();
  source = new FileCertificates({ certPath, keyPath, reloadMs: 20, log });
  const warned = next();
  const starting = source.initial(new AbortController().signal);
  await warned;
  expect(warnings).toHaveLength(1);
  expect(warnings[0]).toContain(
    `--tls-cert ${certPath} and --tls-key ${keyPath} are not a pair that can be served`,
  );
  // Read again and again meanwhile, said once.
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(warnings).toHaveLength(1);
  await writeFile(keyPath, a.keyPem);
  expect(await starting).toEqual(a);

  const changes: TlsPair[] = [];
  let changed: () => void = () => {};
  const handed = new Promise<void>((resolve) => (changed = resolve));
  source.watch((tls) => {
    changes.push(tls);
    changed();
  });
  // A rotation caught between its two files: the new certificate with the old key is not served.
  const rotation = next();
  await writeFile(certPath, b.certPem);
  await rotation;
  expect(warnings[1]).toContain("are not a pair that can be served");
  expect(changes).toEqual([]);
  await writeFile(keyPath, b.keyPem);
  await handed;
  expect(changes).toEqual([b]);
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
