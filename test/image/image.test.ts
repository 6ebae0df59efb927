import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { parse } from "yaml";
import { freePort } from "../../lib/free-port.ts";
import { chat, until } from "../helpers/local-snooze.ts";

// The OCI image hack/build-image.sh built, run by its own entrypoint, command, user, environment and
// working directory as its config gives them: in crun when it works here, else from its unpacked
// root file system (umoci unpack) under unshare, with new mount and pid namespaces, the host's
// network (the test reaches it on loopback) and the image's user.

const root = resolve(import.meta.dirname, "../..");

interface ImageConfig {
  Entrypoint: string[];
  Cmd: string[];
  User: string;
  Env: string[];
  WorkingDir: string;
}

let tag = "";
let digest = "";
let layout = "";
let config: ImageConfig;
let scratch = "";
let rootfs = "";
let runtime: "crun" | "unshare" = "unshare";
const running: ChildProcess[] = [];

/** The image's config, from its layout: index → manifest → config blob. */
function imageConfig(layoutDir: string, manifestDigest: string): ImageConfig {
  const blob = (d: string) => JSON.parse(readFileSync(join(layoutDir, "blobs", ...d.split(":")), "utf8"));
  const manifest = blob(manifestDigest) as { config: { digest: string } };
  return (blob(manifest.config.digest) as { config: ImageConfig }).config;
}

/** argv that runs `command` in the image, as the image's user, in its environment and working directory. */
function inImage(command: string[]): string[] {
  if (runtime === "crun") {
    writeBundleProcess(command);
    return ["crun", "--cgroup-manager=disabled", "run", "-b", scratch, containerId()];
  }
  const [uid, gid] = config.User.split(":");
  return [
    "unshare",
    "--mount",
    "--pid",
    "--fork",
    "--kill-child",
    "--mount-proc=/proc",
    `--root=${rootfs}`,
    `--wd=${config.WorkingDir}`,
    `--setgid=${gid}`,
    `--setuid=${uid}`,
    "/usr/bin/env",
    "-i",
    ...config.Env,
    ...command,
  ];
}

let containers = 0;
const containerId = () => `snooze-image-${process.pid}-${++containers}`;

/** Runs `command` in the image to its end. */
function runIn(command: string[]) {
  const [file, ...rest] = inImage(command);
  return spawnSync(file!, rest, { encoding: "utf8", timeout: 30_000 });
}

/** The image's entrypoint with `args`, to its end. */
const runImage = (args: string[]) => runIn([...config.Entrypoint, ...args]);

/** Starts the entrypoint with `args`; its stderr is collected; `stop` sends it SIGTERM. */
function startImage(args: string[]) {
  const argv = inImage([...config.Entrypoint, ...args]);
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
  running.push(child);
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((done) => child.once("close", done));
  const stop = () => {
    if (runtime === "crun") return void spawnSync("crun", ["kill", argv.at(-1)!, "TERM"]);
    // unshare ignores SIGTERM while it waits: the entrypoint (its child) gets it.
    const children = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8")
      .trim()
      .split(/\s+/);
    for (const pid of children) process.kill(Number(pid), "SIGTERM");
  };
  return { child, exited, stop, stderr: () => stderr };
}

/** crun reads the process to run from the bundle's config.json (what `umoci unpack` wrote, adjusted). */
function writeBundleProcess(command: string[]): void {
  const file = join(scratch, "config.json");
  const spec = JSON.parse(readFileSync(file, "utf8"));
  spec.process.args = command;
  spec.process.terminal = false;
  // The host's network, so that the test reaches the server on loopback; no cgroup of its own.
  spec.linux.namespaces = spec.linux.namespaces.filter((n: { type: string }) => n.type !== "network");
  delete spec.linux.resources;
  delete spec.linux.cgroupsPath;
  writeFileSync(file, JSON.stringify(spec));
}

beforeAll(() => {
  // Cached: seconds when the image is built for this checkout (hack/test-image.sh built it first).
  const out = execFileSync(join(root, "hack/build-image.sh"), {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  [tag, digest, layout] = out.trim().split("\n").slice(-3) as [string, string, string];
  config = imageConfig(layout, digest);
  scratch = mkdtempSync(join(tmpdir(), "snooze-image-"));
  execFileSync("umoci", ["unpack", "--image", `${layout}:${tag.split(":")[1]}`, scratch], {
    stdio: "ignore",
  });
  rootfs = join(scratch, "rootfs");
  runtime = "crun";
  const probe =
    spawnSync("crun", ["--version"], { encoding: "utf8" }).status === 0 ? runImage(config.Cmd) : undefined;
  if (probe?.status !== 0) runtime = "unshare";
  console.log(
    `image ${tag} ${digest}: run with ${runtime}${probe && probe.status !== 0 ? ` (crun: ${(probe.stderr || probe.stdout).trim().split("\n")[0]})` : ""}`,
  );
});

afterAll(() => {
  for (const child of running) child.kill("SIGKILL");
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe("the Snooze image", () => {
  test("is what the manifests deploy: the tag of config/default, the user the Deployments run as", () => {
    const kustomization = parse(readFileSync(join(root, "config/default/kustomization.yaml"), "utf8")) as {
      images: { name: string; newName: string; newTag: string }[];
    };
    const image = kustomization.images.find((i) => i.name === "snooze")!;
    expect(`${image.newName}:${image.newTag}`).toBe(tag);
    expect(digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const deployment = parse(readFileSync(join(root, "config/activator/deployment.yaml"), "utf8")) as {
      spec: { template: { spec: { securityContext: { runAsUser: number; runAsGroup: number } } } };
    };
    const context = deployment.spec.template.spec.securityContext;
    expect(config.User).toBe(`${context.runAsUser}:${context.runAsGroup}`);
    expect(config.Entrypoint).toEqual(["/usr/local/bin/snooze"]);
  });

  test("its entrypoint with the default command prints snooze's help, on the pinned Node", () => {
    const help = runImage(config.Cmd);
    expect(help.stderr).toBe("");
    expect(help.status).toBe(0);
    expect(help.stdout).toContain("Usage: snooze <command>");
    for (const command of ["serve", "activator", "autoscaler", "webhooks", "sim"])
      expect(help.stdout).toContain(command);
    const pinned = JSON.parse(readFileSync(join(root, "node_modules/node/package.json"), "utf8")).version;
    expect(runIn(["/usr/local/bin/node", "--version"]).stdout.trim()).toBe(`v${pinned}`);
  });

  test("snooze serve in the image answers a request: a cold start of a snooze sim engine inside it", async () => {
    writeFileSync(
      join(rootfs, "tmp/snooze.yaml"),
      'models:\n  qwen:\n    command: ["${SNOOZE}", "sim", "--served-model-name", "${MODEL}", "--port", "${PORT}", "--load-time", "100ms"]\n',
    );
    const port = await freePort();
    const serve = startImage([
      "serve",
      "--config",
      "/tmp/snooze.yaml",
      "--port",
      String(port),
      "--state-dir",
      "/tmp/state",
    ]);
    await until(
      () => serve.stderr().includes('"msg":"listening"'),
      20_000,
      "snooze serve in the image to listen",
    );
    const response = await fetch(
      `http://127.0.0.1:${port}/v1/chat/completions`,
      chat("qwen", { max_tokens: 3 }),
    );
    const body = (await response.json()) as { model: string; choices: { message: { content: string } }[] };
    expect(response.status).toBe(200);
    expect(body.model).toBe("qwen");
    expect(body.choices[0]!.message.content.length).toBeGreaterThan(0);
    // The engine ran from the image's own Node and app.
    expect(serve.stderr()).toContain('"command":"/usr/local/bin/node /opt/snooze/bin/snooze.js sim');
    serve.stop();
    expect(await serve.exited).toBe(0);
    expect(serve.stderr()).toContain('"msg":"stopped"');
  });
});
