import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { stringify } from "yaml";
import { createCA, issueCert } from "../../test/e2e/harness/certs.ts";
import { KubeClient } from "./client.ts";
import { inClusterCredentials, loadKubeConfig, parseKubeconfig, readKubeconfig } from "./kubeconfig.ts";

const b64 = (text: string) => Buffer.from(text).toString("base64");
const dir = mkdtempSync(join(tmpdir(), "snooze-kubeconfig-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let n = 0;
function file(name: string, content: string): string {
  const path = join(dir, `${++n}-${name}`);
  writeFileSync(path, content);
  return path;
}

/** A kubeconfig with one context `ctx` over cluster `c` and user `u`, plus a decoy context. */
function kubeconfig(
  cluster: Record<string, unknown>,
  user: Record<string, unknown> | undefined,
  context: Record<string, unknown> = {},
) {
  return {
    apiVersion: "v1",
    kind: "Config",
    "current-context": "ctx",
    clusters: [
      { name: "other", cluster: { server: "https://wrong.example:6443" } },
      { name: "c", cluster },
    ],
    users: [{ name: "other", user: { token: "wrong" } }, ...(user ? [{ name: "u", user }] : [])],
    contexts: [
      { name: "other", context: { cluster: "other", user: "other" } },
      { name: "ctx", context: { cluster: "c", ...(user ? { user: "u" } : {}), ...context } },
    ],
  };
}

describe("parseKubeconfig", () => {
  test("the current context's server, CA data, token and namespace", () => {
    const text = stringify(
      kubeconfig(
        {
          server: "https://10.0.0.1:6443",
          "certificate-authority-data": b64("CA PEM\n"),
          "tls-server-name": "kube",
        },
        { token: "abc" },
        { namespace: "team-a" },
      ),
    );
    expect(parseKubeconfig(text)).toEqual({
      server: "https://10.0.0.1:6443",
      ca: "CA PEM\n",
      tlsServerName: "kube",
      token: "abc",
      namespace: "team-a",
    });
  });

  test("file fields are read, relative to the kubeconfig's folder; data fields win over files", () => {
    const sub = mkdtempSync(join(dir, "files-"));
    writeFileSync(join(sub, "ca.crt"), "CA FROM FILE");
    writeFileSync(join(sub, "client.crt"), "CERT FROM FILE");
    writeFileSync(join(sub, "client.key"), "KEY FROM FILE");
    const path = join(sub, "config");
    writeFileSync(
      path,
      stringify(
        kubeconfig(
          { server: "https://kube:6443", "certificate-authority": "ca.crt" },
          {
            "client-certificate": "client.crt",
            "client-key": join(sub, "client.key"),
            tokenFile: "token",
          },
        ),
      ),
    );
    expect(readKubeconfig(path)).toEqual({
      server: "https://kube:6443",
      ca: "CA FROM FILE",
      cert: "CERT FROM FILE",
      key: "KEY FROM FILE",
      tokenFile: join(sub, "token"),
    });
    const both = parseKubeconfig(
      stringify(
        kubeconfig(
          {
            server: "https://kube",
            "certificate-authority": "missing.crt",
            "certificate-authority-data": b64("DATA"),
          },
          { "client-certificate-data": b64("C"), "client-key-data": b64("K") },
        ),
      ),
    );
    expect(both).toMatchObject({ ca: "DATA", cert: "C", key: "K" });
  });

  test("JSON (as client-node's exportConfig writes it, nulls included) and insecure-skip-tls-verify", () => {
    const config = kubeconfig(
      { server: "https://kube", "insecure-skip-tls-verify": true, "proxy-url": null },
      { token: "t", exec: null, "auth-provider": null, password: undefined },
    );
    expect(parseKubeconfig(JSON.stringify(config))).toEqual({
      server: "https://kube",
      insecureSkipTlsVerify: true,
      token: "t",
    });
  });

  test("a context without a user is anonymous", () => {
    expect(parseKubeconfig(stringify(kubeconfig({ server: "http://127.0.0.1:8080" }, undefined)))).toEqual({
      server: "http://127.0.0.1:8080",
    });
  });

  test.each([
    [
      { exec: { command: "aws", apiVersion: "client.authentication.k8s.io/v1" } },
      /user "u" uses exec \(exec credential plugins\), which Snooze does not support; use a bearer token/,
    ],
    [{ "auth-provider": { name: "gcp" } }, /user "u" uses auth-provider \(auth-provider plugins\)/],
    [{ username: "admin", password: "secret" }, /uses username \(basic authentication\)/],
    [{ token: "t", as: "someone" }, /uses as \(impersonation\)/],
    [{ "client-certificate-data": b64("C") }, /client certificate without its key/],
  ])("refused by name: %j", (user, message) => {
    expect(() => parseKubeconfig(stringify(kubeconfig({ server: "https://kube" }, user)))).toThrow(message);
  });

  test("what is missing is said", () => {
    const config = kubeconfig({ server: "https://kube" }, { token: "t" });
    const parse = (c: object) => () => parseKubeconfig(stringify(c), { source: "/tmp/k" });
    expect(parse({ ...config, "current-context": "" })).toThrow("kubeconfig /tmp/k: no current-context");
    expect(parse({ ...config, "current-context": "nope" })).toThrow(
      /current-context "nope" is not among its contexts/,
    );
    expect(parse(kubeconfig({}, { token: "t" }))).toThrow(/cluster "c" has no server/);
    expect(
      parse(kubeconfig({ server: "https://kube", "proxy-url": "http://proxy:3128" }, undefined)),
    ).toThrow(/cluster "c" uses proxy-url/);
    expect(
      parse(
        kubeconfig({ server: "https://kube", "certificate-authority": "/nonexistent/ca.crt" }, undefined),
      ),
    ).toThrow(/cannot read certificate-authority \/nonexistent\/ca.crt/);
    // Before, these were taken and every request retried for ever; the password was logged.
    expect(parse(kubeconfig({ server: "not a url" }, { token: "t" }))).toThrow(
      'cluster "c": server "not a url" is not an http(s) URL, such as https://10.0.0.1:6443',
    );
    expect(parse(kubeconfig({ server: "ftp://kube:6443" }, { token: "t" }))).toThrow(
      /is not an http\(s\) URL/,
    );
    const withPassword = parse(kubeconfig({ server: "https://admin:HUNTER2@kube:6443" }, { token: "t" }));
    expect(withPassword).toThrow(
      /cluster "c": server "https:\/\/admin:redacted@kube:6443\/" carries a user name or password/,
    );
    expect(withPassword).not.toThrow(/HUNTER2/);
    expect(() => parseKubeconfig("clusters: [", { source: "/tmp/k" })).toThrow(/not valid YAML/);
    expect(() => readKubeconfig(join(dir, "absent"))).toThrow(/cannot read the kubeconfig/);
  });
});

describe("a token a header cannot carry", () => {
  // Before, fetch refused the header with an error quoting it whole, logged at every retry: the
  // cluster credential in the components' logs.
  const secret = "SECRET-TOKEN-abc";
  const parse = (token: string) => () =>
    parseKubeconfig(stringify(kubeconfig({ server: "https://kube" }, { token })), { source: "/tmp/k" });

  test("in the kubeconfig: refused at start, naming the user and the character, never the token", () => {
    const cases: [string, RegExp][] = [
      [`${secret}\n`, /user "u": token holds a line break at character 17 of 17/],
      [`${secret}\nmore`, /user "u": token holds a line break at character 17 of 21/],
      [`${secret}\u00e9`, /user "u": token holds a character outside ASCII at character 17/],
      [`\t${secret}`, /user "u": token holds a tab at character 1/],
    ];
    for (const [token, message] of cases) {
      expect(parse(token)).toThrow(message);
      try {
        parse(token)();
      } catch (error) {
        expect((error as Error).message).not.toContain(secret);
      }
    }
    expect(parse(secret)).not.toThrow();
  });

  test("in a token file: each request fails naming the file, never the token", async () => {
    const tokenFile = file("token", `${secret}\nsecond-line\n`);
    const client = new KubeClient({ server: "https://127.0.0.1:1", tokenFile });
    const failure = await client.get("/version").catch((error: Error) => error);
    expect((failure as Error).message).toBe(
      `the token file ${tokenFile} holds a line break at character 17 of 28, which an HTTP header cannot carry (the token is not shown)`,
    );
    await client.close();
  });
});

describe("loadKubeConfig", () => {
  test("$KUBECONFIG that names no file that exists is said as such, not told to be set", () => {
    // Found by a probe: `KUBECONFIG=/nonexistent snooze autoscaler` said "set KUBECONFIG".
    const env = { KUBECONFIG: `${join(dir, "gone-a")}:${join(dir, "gone-b")}` };
    expect(() => loadKubeConfig(undefined, env, join(dir, "no-sa"))).toThrow(
      `no Kubernetes API to talk to: KUBECONFIG names no file that exists (${join(dir, "gone-a")}, ${join(dir, "gone-b")}): pass --kubeconfig <file>, or set KUBECONFIG to a kubeconfig file`,
    );
    // Its first file that exists is read, as kubectl reads the list.
    const real = file("kubeconfig", stringify(kubeconfig({ server: "https://api:6443" }, { token: "t" })));
    expect(loadKubeConfig(undefined, { KUBECONFIG: `${join(dir, "gone-a")}:${real}` }).source).toBe(
      "KUBECONFIG",
    );
  });

  test("in a pod without its ServiceAccount token mounted: said, not 'run in a pod'", () => {
    const env = { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" };
    expect(() => loadKubeConfig(undefined, env, join(dir, "no-sa"))).toThrow(
      `no Kubernetes API to talk to: this runs in a pod (KUBERNETES_SERVICE_HOST is set), but its ServiceAccount token ${join(dir, "no-sa", "token")} is not there (automountServiceAccountToken: false?): mount it, or pass --kubeconfig <file>`,
    );
  });

  test("nothing at all: every way to name an API server", () => {
    expect(() => loadKubeConfig(undefined, {}, join(dir, "no-sa"))).toThrow(
      "no Kubernetes API to talk to: pass --kubeconfig <file>, set KUBECONFIG, or run in a pod with a ServiceAccount token",
    );
  });
});

describe("inClusterCredentials", () => {
  test("the service host and port, the mounted token (as a file), CA and namespace", () => {
    const sa = mkdtempSync(join(dir, "sa-"));
    writeFileSync(join(sa, "token"), "jwt");
    writeFileSync(join(sa, "ca.crt"), "CLUSTER CA");
    writeFileSync(join(sa, "namespace"), "snooze-system\n");
    const env = { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" };
    expect(inClusterCredentials(env, sa)).toEqual({
      server: "https://10.96.0.1:443",
      ca: "CLUSTER CA",
      tokenFile: join(sa, "token"),
      namespace: "snooze-system",
    });
    expect(inClusterCredentials({ ...env, KUBERNETES_SERVICE_HOST: "fd00::1" }, sa).server).toBe(
      "https://[fd00::1]:443",
    );
    expect(() => inClusterCredentials({ KUBERNETES_SERVICE_HOST: "10.96.0.1" }, sa)).toThrow(
      /KUBERNETES_SERVICE_PORT/,
    );
    expect(() => inClusterCredentials(env, join(dir, "no-sa"))).toThrow(/ServiceAccount token/);
  });
});

test("a token file or a ServiceAccount file that is a named pipe or a device is refused by what it is; nothing waits for a writer", async () => {
  // Found by an outside tester: the token file, read again for every request, was read with
  // readFile, so a named pipe kept a thread of libuv's pool waiting for good at each request, and
  // /dev/zero was read on and on; in a pod, the mounted ca.crt was read with readFileSync.
  const fifo = join(dir, "fifo");
  execFileSync("mkfifo", [fifo]);
  for (const [tokenFile, what] of [
    [fifo, "a named pipe (FIFO)"],
    ["/dev/zero", "a device"],
  ] as const) {
    const client = new KubeClient({ server: "https://127.0.0.1:1", tokenFile });
    await expect(client.bearerToken()).rejects.toThrow(
      `cannot read the token file ${tokenFile}: it is ${what}, not a regular file`,
    );
    await client.close();
  }
  const sa = mkdtempSync(join(dir, "sa-"));
  writeFileSync(join(sa, "token"), "jwt");
  execFileSync("mkfifo", [join(sa, "ca.crt")]);
  expect(() =>
    inClusterCredentials({ KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" }, sa),
  ).toThrow("it is a named pipe (FIFO), not a regular file");
});

describe("KubeClient with loaded credentials", () => {
  let server: Server;
  let caPem: string;
  let url: string;
  let client: { cert: string; key: string };
  const seen: { authorization?: string; clientCN?: string }[] = [];

  beforeAll(async () => {
    const certs = mkdtempSync(join(dir, "certs-"));
    const ca = await createCA(certs, "kubeconfig-test-ca");
    const serving = await issueCert(ca, certs, "serving", {
      commonName: "kube-apiserver",
      ipAddresses: ["127.0.0.1"],
      usage: "server",
    });
    const user = await issueCert(ca, certs, "user", { commonName: "jane", usage: "client" });
    caPem = ca.certPem;
    client = { cert: user.certPem, key: user.keyPem };
    server = createServer(
      { cert: serving.certPem, key: serving.keyPem, ca: caPem, requestCert: true, rejectUnauthorized: false },
      (request, response) => {
        const socket = request.socket as TLSSocket;
        const peer = socket.authorized ? socket.getPeerCertificate() : undefined;
        seen.push({ authorization: request.headers.authorization, clientCN: peer?.subject?.CN as string });
        response.setHeader("content-type", "application/json");
        response.end(JSON.stringify({ kind: "Status", path: request.url }));
      },
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  test("trusts the kubeconfig's CA and reads the token file again for every request", async () => {
    const token = file("token", "first\n");
    const path = file(
      "config",
      stringify(
        kubeconfig({ server: `${url}/`, "certificate-authority-data": b64(caPem) }, { tokenFile: token }),
      ),
    );
    const client = await KubeClient.fromKubeConfig(readKubeconfig(path));
    expect(client.server).toBe(url);
    expect(await client.get("/api/v1/namespaces")).toEqual({ kind: "Status", path: "/api/v1/namespaces" });
    writeFileSync(token, "rotated");
    await client.get("/version");
    expect(seen.slice(-2).map((s) => s.authorization)).toEqual(["Bearer first", "Bearer rotated"]);
    await client.close();
  });

  test("an exportable kubeconfig (client-node's KubeConfig in tests) works as well", async () => {
    const config = kubeconfig({ server: url, "certificate-authority-data": b64(caPem) }, { token: "static" });
    const client = await KubeClient.fromKubeConfig({ exportConfig: () => JSON.stringify(config) });
    await client.get("/version");
    expect(seen.at(-1)?.authorization).toBe("Bearer static");
    await client.close();
  });

  test("an untrusted server certificate fails, unless insecure-skip-tls-verify says otherwise", async () => {
    const strict = new KubeClient({ server: url });
    await expect(strict.get("/version")).rejects.toThrow();
    await strict.close();
    const insecure = new KubeClient({ server: url, insecureSkipTlsVerify: true });
    expect(await insecure.get("/version")).toMatchObject({ kind: "Status" });
    expect(seen.at(-1)).toEqual({});
    await insecure.close();
  });

  test("a client certificate from the kubeconfig identifies the user", async () => {
    const path = file(
      "config",
      stringify(
        kubeconfig(
          { server: url, "certificate-authority-data": b64(caPem) },
          { "client-certificate": file("user.crt", client.cert), "client-key-data": b64(client.key) },
        ),
      ),
    );
    const kube = await KubeClient.fromKubeConfig(readKubeconfig(path));
    await kube.get("/version");
    expect(seen.at(-1)).toEqual({ clientCN: "jane" });
    await kube.close();
  });
});
