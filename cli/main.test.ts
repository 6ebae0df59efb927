import { spawnSync } from "node:child_process";
import { afterEach, beforeEach, expect, test, vi } from "vitest";
import { commands } from "./commands.ts";
import { main } from "./main.ts";

let output: string[] = [];
beforeEach(() => {
  output = [];
  vi.spyOn(console, "log").mockImplementation((...args) => void output.push(args.join(" ")));
  vi.spyOn(console, "error").mockImplementation((...args) => void output.push(args.join(" ")));
});
afterEach(() => vi.restoreAllMocks());

test("every command answers --help with its flags", async () => {
  for (const command of commands) {
    output = [];
    expect(await main([command.name, "--help"])).toBe(0);
    expect(output.join("\n")).toContain(`Usage: snooze ${command.name}`);
  }
  expect(commands.map((c) => c.name)).toEqual(expect.arrayContaining(["serve", "status", "sim"]));
});

test("every command's help lists -h with --help, as -h works everywhere", async () => {
  for (const command of commands) {
    output = [];
    expect(await main([command.name, "-h"])).toBe(0);
    expect(output.join("\n")).toMatch(/^ {2}-h, --help {2,}show this help$/m);
  }
});

test("each command loads under its own name, only when it runs", async () => {
  for (const entry of commands) expect((await entry.load()).name).toBe(entry.name);
  expect(await main(["--help"])).toBe(0);
  expect(output.join("\n")).toMatch(/^ {2}wake {4,}Wake \(or start\) a model now/m);
});

test("no command at all is a usage error: the help on stderr, exit 2", async () => {
  const errors: string[] = [];
  vi.spyOn(console, "error").mockImplementation((...args) => void errors.push(args.join(" ")));
  expect(await main([])).toBe(2);
  expect(errors.join("\n")).toContain("Usage: snooze <command>");
  expect(output).toEqual([]);
});

test("an unknown command exits 2 and lists the commands", async () => {
  expect(await main(["snore"])).toBe(2);
  expect(output.join("\n")).toMatch(/unknown command "snore"\. Commands: serve, status/);
});

test("an unknown flag exits 2 naming it", async () => {
  expect(await main(["serve", "--portt", "1"])).toBe(2);
  expect(output.join("\n")).toContain("Unknown option '--portt'");
});

test("a misspelt flag is answered with the one meant; one near none is said as before", async () => {
  // Found by an outside tester: `snooze serve --prot 1` named no flag, while a misspelt command did.
  expect(await main(["serve", "--prot", "1"])).toBe(2);
  expect(output.join("\n")).toContain("snooze serve: Unknown option '--prot'; did you mean '--port'?");
  output = [];
  expect(await main(["serve", "--shutdown_grace=5s"])).toBe(2);
  expect(output.join("\n")).toContain("did you mean '--shutdown-grace'?");
  output = [];
  // A command that takes positionals: the suggestion replaces Node's hint about `--`.
  expect(await main(["wake", "qwen", "--no-wiat"])).toBe(2);
  expect(output.join("\n")).toContain("snooze wake: Unknown option '--no-wiat'; did you mean '--no-wait'?");
  output = [];
  expect(await main(["status", "--frobnicate"])).toBe(2);
  expect(output.join("\n")).toContain("Unknown option '--frobnicate'");
  expect(output.join("\n")).not.toContain("did you mean");
});

test("an unknown flag near none is answered with the flags the command takes, not Node's hint to pass it as a model", async () => {
  // Found by an outside tester: `snooze wake qwen --json` was told to write `-- "--json"` (a quote
  // left open), as if `--json` were a model's name.
  expect(await main(["wake", "qwen", "--json"])).toBe(2);
  expect(output.join("\n")).toContain(
    "snooze wake: Unknown option '--json'; snooze wake takes --url, --admin-token-file, --no-wait, --timeout, --help (a model whose name begins with '-' goes after '--': snooze wake -- --json)",
  );
  expect(output.join("\n")).not.toContain("positional");
  output = [];
  expect(await main(["status", "-x"])).toBe(2);
  expect(output.join("\n")).toContain(
    "snooze status: Unknown option '-x'; snooze status takes --url, --admin-token-file, --json, --watch, --interval, --help\n",
  );
});

test("snooze webhooks refuses a body limit under one byte", async () => {
  expect(await main(["webhooks", "--max-body-size", "0"])).toBe(2);
  expect(output.join("\n")).toContain("--max-body-size must be a size of at least 1 byte");
});

test("snooze autoscaler checks its event and host-memory flags before connecting", async () => {
  expect(await main(["autoscaler", "--event-mode", "xml"])).toBe(2);
  expect(output.join("\n")).toContain("--event-mode must be binary or structured");
  expect(await main(["autoscaler", "--event-sink", "ftp://sink"])).toBe(2);
  expect(output.join("\n")).toContain("--event-sink must be an http(s) URL");
  // A URL parser takes `localhost:9000` (scheme `localhost:`), and the old check `http://a b`.
  for (const sink of ["localhost:9000", "http://a b"]) {
    expect(await main(["autoscaler", "--event-sink", sink])).toBe(2);
    expect(output.join("\n")).toContain(`--event-sink must be an http(s) URL, not "${sink}"`);
  }
  // A password with a `%` that begins no escape: every event would fail before it was sent.
  expect(await main(["autoscaler", "--event-sink", "http://user:p%ss@sink/"])).toBe(2);
  expect(output.join("\n")).toContain("its password has a % that is no percent-escape");
  expect(output.join("\n")).not.toContain("p%ss");
  expect(await main(["autoscaler", "--host-memory-budget", "lots"])).toBe(2);
  expect(output.join("\n")).toContain("--host-memory-budget must be a size like 64Gi");
});

test("snooze activator and autoscaler refuse a URL that is none before connecting", async () => {
  // Found by an outside tester: `--autoscaler-url x` was taken, and every demand sent to it failed.
  expect(await main(["activator", "--autoscaler-url", "x"])).toBe(2);
  expect(output.join("\n")).toContain("snooze activator: --autoscaler-url must be an http(s) URL, such as");
  expect(output.join("\n")).toContain('not "x"');
  output = [];
  expect(await main(["autoscaler", "--advertise-address", "10.0.0.7:8090"])).toBe(2);
  expect(output.join("\n")).toContain(
    "snooze autoscaler: --advertise-address must be an http(s) URL, such as",
  );
});

test("snooze activator and autoscaler refuse an empty --identity before connecting", async () => {
  // Found by an outside tester: it was taken, and a Lease held by "" is one nobody holds.
  for (const command of ["activator", "autoscaler"]) {
    output = [];
    expect(await main([command, "--identity", ""])).toBe(2);
    expect(output.join("\n")).toContain(`snooze ${command}: --identity is empty: name this replica`);
  }
});

test("the executable refuses an old Node.js with a clear message", () => {
  // The machine's own `node` may be older than 22.18; simulate one by overriding the version.
  const result = spawnSync(
    process.execPath,
    [
      "-e",
      'Object.defineProperty(process.versions, "node", { value: "20.1.0" }); await import("./bin/snooze.js")',
    ],
    {
      input: "",
      encoding: "utf8",
      env: { ...process.env, NODE_OPTIONS: "--input-type=module" },
    },
  );
  expect(result.status).toBe(1);
  expect(result.stderr).toContain("Snooze needs Node.js 24 LTS");
});

test("a misspelt command is answered with the one meant, as a misspelt settings key is", async () => {
  // Found by an outside tester: `snooze statsu` listed the commands, no "did you mean".
  expect(await main(["statsu"])).toBe(2);
  expect(output.join("\n")).toMatch(
    /^snooze: unknown command "statsu"; did you mean "status"\? Commands: serve, status/,
  );
  output = [];
  expect(await main(["snore"])).toBe(2);
  expect(output.join("\n")).not.toContain("did you mean");
});

test("`snooze help <command>` is that command's help; an unknown one is said", async () => {
  // Found by an outside tester: it printed the general help.
  expect(await main(["help", "status"])).toBe(0);
  expect(output.join("\n")).toMatch(/^Usage: snooze status \[flags\]/);
  expect(output.join("\n")).toContain("--watch");
  output = [];
  expect(await main(["help", "wkae"])).toBe(2);
  expect(output.join("\n")).toContain('unknown command "wkae"; did you mean "wake"?');
});

test("a short flag written with `=` (`-n=5`, `-c=file`) takes what follows the `=`, as a long one does", async () => {
  // Found by a probe: Node's parser read `-c=snooze.yaml` as the file "=snooze.yaml", `-n=5` as
  // "=5", and `logs -f=1` as three flags, answering "Unknown option '-='".
  const { parseCommandArgs } = await import("./command.ts");
  const { logsCommand } = await import("./model-commands.ts");
  expect(parseCommandArgs(logsCommand, ["qwen", "-n=5"]).values.lines).toBe("5");
  expect(parseCommandArgs(logsCommand, ["-n=", "qwen"]).values.lines).toBe("");
  // After `--` it is a model's name, as it is written.
  expect(parseCommandArgs(logsCommand, ["--", "-n=5"]).positionals).toEqual(["-n=5"]);
  // A real process: a server command's run ends its process after it returns.
  const serve = spawnSync(
    process.execPath,
    ["bin/snooze.js", "serve", "-p=0", "-c=/nonexistent/snooze.yaml"],
    {
      encoding: "utf8",
      timeout: 30_000,
    },
  );
  expect(serve.status).toBe(2);
  expect(serve.stderr).toContain("\n/nonexistent/snooze.yaml: (top level): cannot read the file");
  expect(await main(["logs", "qwen", "-f=1"])).toBe(2);
  expect(output.join("\n")).toContain("snooze logs: -f (--follow) takes no value: write -f alone");
});

test("`snooze version` or `-help` is answered with --version or --help; a flag before the command is told to follow it", async () => {
  expect(await main(["version"])).toBe(2);
  expect(output.join("\n")).toContain('snooze: unknown command "version"; did you mean "--version"?');
  output = [];
  expect(await main(["-help"])).toBe(2);
  expect(output.join("\n")).toContain('snooze: unknown command "-help"; did you mean "--help"?');
  output = [];
  // Found by a probe: `snooze --port 9000 serve` said only that "--port" is no command.
  expect(await main(["--port", "9000", "serve"])).toBe(2);
  expect(output.join("\n")).toContain(
    'snooze: "--port" is not a command: flags go after the command they belong to (snooze serve --port 9000)',
  );
});

test("a flag written with a word more or less than the one meant is answered with it (--config-file, --token-file)", async () => {
  // Found by a probe: `--config-file`, `webhooks --tls-cert-file` and `--token-file` were too far
  // from `--config`, `--tls-cert` and `--admin-token-file` to be suggested.
  expect(await main(["serve", "--config-file", "x.yaml"])).toBe(2);
  expect(output.join("\n")).toContain(
    "snooze serve: Unknown option '--config-file'; did you mean '--config'?",
  );
  output = [];
  expect(await main(["webhooks", "--tls-cert-file", "c.pem"])).toBe(2);
  expect(output.join("\n")).toContain("did you mean '--tls-cert'?");
  output = [];
  expect(await main(["status", "--token-file", "t"])).toBe(2);
  expect(output.join("\n")).toContain("did you mean '--admin-token-file'?");
  output = [];
  // Not its opposite: `--wait` is not `--no-wait`.
  expect(await main(["wake", "q", "--wait"])).toBe(2);
  expect(output.join("\n")).not.toContain("did you mean");
});

test("snooze sim answers a misspelt flag with the one meant, in vLLM's words otherwise", async () => {
  // Found by a probe: the simulator's refusal lost its kind on the way, so `sim --prot 8001` was
  // never answered with `--port`, as every other command's misspelt flag is.
  expect(await main(["sim", "--prot", "8001"])).toBe(2);
  expect(output.join("\n")).toContain("snooze sim: unrecognized arguments: --prot; did you mean '--port'?");
  output = [];
  // vLLM's flags that change nothing here too.
  expect(await main(["sim", "--tensor-parallel-sise", "2"])).toBe(2);
  expect(output.join("\n")).toContain("did you mean '--tensor-parallel-size'?");
  output = [];
  // A misspelt `--no-` form is answered with the `--no-` form, not with the flag it turns off.
  expect(await main(["sim", "--no-enable-prefx-caching"])).toBe(2);
  expect(output.join("\n")).toContain("did you mean '--no-enable-prefix-caching'?");
  output = [];
  expect(await main(["sim", "--frobnicate"])).toBe(2);
  expect(output.join("\n")).toContain(
    "snooze sim: unrecognized arguments: --frobnicate (a flag neither vLLM nor the simulator has)",
  );
});

test("a flag without its value is one line naming the flag, not Node's parser's three", async () => {
  // Found by a docs walk: `snooze serve --port --watch-config` printed Node's "Option '--port'
  // argument is ambiguous. Did you forget …? To specify an option argument starting with a dash
  // use '--port=-XYZ'.", and a flag last on the line "Option '-p, --port <value>' argument missing".
  expect(await main(["serve", "--port", "--watch-config"])).toBe(2);
  expect(output.join("\n")).toContain(
    "snooze serve: --port needs a value, and what follows it, --watch-config, is a flag (a value that begins with - is written --port=<value>)",
  );
  expect(output.join("\n")).not.toContain("XYZ");
  output = [];
  expect(await main(["serve", "-c"])).toBe(2);
  expect(output.join("\n")).toContain("snooze serve: --config needs a value: --config <file>");
  output = [];
  expect(await main(["status", "--url"])).toBe(2);
  expect(output.join("\n")).toContain("snooze status: --url needs a value: --url <url>");
});

test("snooze sim refuses a flag without its value in argparse's words, as vllm serve does", async () => {
  // The simulator's own flags as its vLLM ones (`--dtype`): `argument --port: expected one argument`.
  expect(await main(["sim", "--port", "--enable-sleep-mode"])).toBe(2);
  expect(output.join("\n")).toContain("snooze sim: argument --port: expected one argument");
  output = [];
  expect(await main(["sim", "--load-time"])).toBe(2);
  expect(output.join("\n")).toContain("snooze sim: argument --load-time: expected one argument");
  output = [];
  expect(await main(["sim", "--served-model-name", "--port", "8001"])).toBe(2);
  expect(output.join("\n")).toContain(
    "snooze sim: argument --served-model-name: expected at least one argument",
  );
  output = [];
  // A negative number is a value to argparse (vLLM's `--max-model-len -1`), as before.
  expect(await main(["sim", "--max-model-len", "-1", "--port", "x"])).toBe(2);
  expect(output.join("\n")).not.toContain("expected one argument");
});
