import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { silentLogger } from "../../lib/log.ts";
import type { TlsPair } from "../server.ts";
import { FileCertificates } from "./sources.ts";

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
  await writeFile(certPath, "cert-2");
  await writeFile(keyPath, "key-2");
  await next;
  expect(changes).toEqual([{ certPem: "cert-2", keyPem: "key-2" }]);
});
