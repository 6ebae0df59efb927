import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
import { UsageError } from "../lib/cli-flags.ts";
import { modelList } from "./answer-shapes.ts";
import { AdminClient, serverUrl } from "./client.ts";

/** A server that answers every request with the path and query it was asked for. */
const echo = createServer((req, res) => {
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ models: [], asked: req.url }));
});
let origin = "";
beforeAll(async () => {
  echo.listen(0, "127.0.0.1");
  await once(echo, "listening");
  origin = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
});
afterAll(() => void echo.close());

const asked = async (url: string, path: string) =>
  (await new AdminClient({ url }, {}).json<{ asked: string }>(path, modelList)).asked;

test("the admin API's path goes under the base URL's own path (Snooze behind a proxy's prefix)", async () => {
  expect(await asked(origin, "/snooze/v1/models")).toBe("/snooze/v1/models");
  expect(await asked(`${origin}/`, "/snooze/v1/models")).toBe("/snooze/v1/models");
  expect(await asked(`${origin}/gpu-box/`, "/snooze/v1/models/a%2Cb/logs?lines=5")).toBe(
    "/gpu-box/snooze/v1/models/a%2Cb/logs?lines=5",
  );
  expect(serverUrl({ url: `${origin}/gpu-box//` })).toBe(`${origin}/gpu-box`);
});

test("a base URL whose port is out of range says so, not that it is no http:// URL", () => {
  // Found by an outside tester: `--url http://127.0.0.1:99999` "must be an http:// URL".
  expect(() => serverUrl({ url: "http://127.0.0.1:99999" })).toThrow(
    '--url has the port 99999, out of range: a port is 1 to 65535; got "http://127.0.0.1:99999"',
  );
  expect(() => serverUrl({}, { SNOOZE_URL: "https://user@[::1]:65536/snooze" })).toThrow(
    /^SNOOZE_URL has the port 65536, out of range/,
  );
  expect(() => serverUrl({ url: "ftp://127.0.0.1:99999" })).toThrow(/must be an http:\/\/ or https:\/\/ URL/);
  expect(serverUrl({ url: "http://127.0.0.1:65535" })).toBe("http://127.0.0.1:65535");
});

test("a base URL with a query or a fragment is a usage mistake, not a request to the wrong path", () => {
  // Found by an outside tester: `--url 'http://127.0.0.1:18200?x=1'` asked `/?x=1/snooze/v1/models`,
  // the status page.
  for (const url of [`${origin}?x=1`, `${origin}/#frag`, `${origin}/prefix?x=1#frag`]) {
    expect(() => serverUrl({ url })).toThrow(UsageError);
    expect(() => serverUrl({ url })).toThrow(
      `--url must be Snooze's address alone, without a query (?…) or fragment (#…), such as http://127.0.0.1:8080; got ${JSON.stringify(url)}`,
    );
  }
  expect(() => serverUrl({}, { SNOOZE_URL: `${origin}?x=1` })).toThrow(
    /^SNOOZE_URL must be Snooze's address alone/,
  );
});

test("the OpenAI base URL (ending in /v1) given as Snooze's address is a usage error naming the flag", () => {
  // Found by a probe: SNOOZE_URL set as OPENAI_BASE_URL made every command a 404 for /v1/snooze/v1/models.
  expect(() => serverUrl({ url: "http://127.0.0.1:8080/v1/" })).toThrow(
    '--url is Snooze\'s own address, not the OpenAI base URL its clients use: drop the /v1 (http://127.0.0.1:8080); got "http://127.0.0.1:8080/v1/"',
  );
  expect(() => serverUrl({}, { SNOOZE_URL: "http://gpu-box/proxy/V1" })).toThrow(
    /^SNOOZE_URL is Snooze's own address, not the OpenAI base URL its clients use: drop the \/v1 \(http:\/\/gpu-box\/proxy\)/,
  );
  // Its admin API's address: dropping only the /v1 left /snooze, whose commands all got a 404
  // (found by an outside tester); both readings are offered, /snooze may be a proxy's prefix.
  expect(() => serverUrl({ url: "http://127.0.0.1:8080/snooze/v1/" })).toThrow(
    "--url is Snooze's own address, not its admin API's (the commands add /snooze/v1 themselves) nor the OpenAI base URL its clients use: drop the /snooze/v1 (http://127.0.0.1:8080), or only the /v1 when a proxy serves Snooze under /snooze (http://127.0.0.1:8080/snooze); got \"http://127.0.0.1:8080/snooze/v1/\"",
  );
  expect(() => serverUrl({}, { SNOOZE_URL: "http://gpu-box/snooze/V1" })).toThrow(
    /^SNOOZE_URL is Snooze's own address, not its admin API's .*: drop the \/snooze\/v1 \(http:\/\/gpu-box\), or only the \/v1 when a proxy serves Snooze under \/snooze \(http:\/\/gpu-box\/snooze\)/,
  );
  expect(serverUrl({ url: "http://gpu-box/v1x" })).toBe("http://gpu-box/v1x");
});

test("an address written without http:// is answered with the one meant; one with a user or password is refused, not stripped", () => {
  // Found by a probe: `--url localhost:8080` (as curl takes it) was only "not an http:// URL".
  expect(() => serverUrl({ url: "localhost:8080" })).toThrow(
    '--url must be an http:// or https:// URL, such as http://127.0.0.1:8080; got "localhost:8080" (did you mean "http://localhost:8080"?)',
  );
  expect(() => serverUrl({}, { SNOOZE_URL: "127.0.0.1:8080/snooze" })).toThrow(
    '(did you mean "http://127.0.0.1:8080/snooze"?)',
  );
  // A user and password were dropped without a word, so a proxy that wants them answered 401.
  expect(() => serverUrl({ url: "http://admin:s3cret@gpu-box:8080" })).toThrow(
    '--url holds a user name or password ("http://admin:redacted@gpu-box:8080/"), which the commands do not send: Snooze\'s admin API takes a bearer token (--admin-token-file or $SNOOZE_ADMIN_TOKEN); drop them from the address',
  );
  expect(() => serverUrl({}, { SNOOZE_URL: "http://admin@gpu-box" })).toThrow(UsageError);
});

test("an https:// Snooze whose certificate is not trusted is said as such, with how to trust it", async () => {
  // Found by a probe: a proxy with its own CA before Snooze was answered "self-signed certificate;
  // ... try running Node.js with --use-system-ca (is Snooze running? ...)": Snooze was running, and
  // a flag of Node's cannot be given through `npx snooze`.
  const { mkdtempSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const https = await import("node:https");
  const { createCA, issueCert } = await import("../test/e2e/harness/certs.ts");
  const dir = mkdtempSync(join(tmpdir(), "snooze-client-tls-"));
  const ca = await createCA(dir, "proxy-ca");
  const serving = await issueCert(ca, dir, "proxy", {
    commonName: "proxy",
    ipAddresses: ["127.0.0.1"],
    usage: "server",
  });
  const proxy = https.createServer({ cert: serving.certPem, key: serving.keyPem }, (_req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ models: [] }));
  });
  proxy.listen(0, "127.0.0.1");
  await once(proxy, "listening");
  const url = `https://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  try {
    const said = await new AdminClient({ url }, {}).json("/snooze/v1/models", modelList).then(
      () => "",
      (error: Error) => error.message,
    );
    expect(said).toBe(
      `cannot reach ${url}: its TLS certificate is not trusted (unable to verify the first certificate): give Node.js its CA, NODE_EXTRA_CA_CERTS=<ca.pem>, or NODE_OPTIONS=--use-system-ca when the system trusts it`,
    );
    const action = await new AdminClient({ url }, {}).action("/snooze/v1/models/m/sleep", modelList).then(
      () => "",
      (error: Error) => error.message,
    );
    expect(action).toContain(`cannot reach ${url}: its TLS certificate is not trusted`);
  } finally {
    proxy.close();
  }
});
