import { afterEach, beforeEach, expect, test, vi } from "vitest";
import { commands } from "./commands.ts";
import { main } from "./main.ts";

let output: string[] = [];
beforeEach(() => {
  output = [];
  vi.spyOn(console, "log").mockImplementation((...args) => void output.push(args.join(" ")));
  vi.spyOn(console, "error").mockImplementation((...args) => void output.push(args.join(" ")));
  // A server command that got past its flags would end this process a second after returning.
  vi.spyOn(process, "exit").mockImplementation((() => {}) as never);
});
afterEach(() => vi.restoreAllMocks());

const limit = "at most 596h31m23.647s (2^31-1 ms, about 24.8 days: the longest a timer waits)";
// Written into a certificate, never waited for by a timer: a year is the CA's default.
const lifetimes = ["ca-validity", "cert-validity"];

/**
 * Flags that get each command no further than its flags when they are all it took: no settings
 * file, no cluster, no Snooze at its address.
 */
function goNowhere(flags: Record<string, unknown>, positionals: string | undefined): string[] {
  return [
    ...("config" in flags ? ["--config", "/nonexistent/snooze.yaml"] : []),
    ...("kubeconfig" in flags ? ["--kubeconfig", "/nonexistent/kubeconfig"] : []),
    ...("url" in flags ? ["--url", "http://127.0.0.1:1"] : []),
    ...(positionals ? ["qwen"] : []),
  ];
}

test("every duration flag of every command stops where a timer can wait: 720h exits 2 naming the flag and the limit", {
  timeout: 30_000,
}, async () => {
  // Found by an outside tester: `serve --shutdown-grace 720h` killed streams at once on SIGTERM,
  // `wake --timeout 720h` gave up at once, `status --watch --interval 720h` redrew in a tight loop.
  const checked: string[] = [];
  for (const entry of commands) {
    // `snooze sim` would serve on its port if it took the flag: test/sim/options.test.ts checks it.
    if (entry.name === "sim") continue;
    const command = await entry.load();
    for (const [flag, descriptor] of Object.entries(command.flags)) {
      if (descriptor.placeholder !== "duration" || lifetimes.includes(flag)) continue;
      output = [];
      const code = await main([
        entry.name,
        `--${flag}`,
        "720h",
        ...goNowhere(command.flags, command.positionals),
      ]);
      checked.push(`${entry.name} --${flag}`);
      expect({ flag: `${entry.name} --${flag}`, code, output: output[0] }).toEqual({
        flag: `${entry.name} --${flag}`,
        code: 2,
        output: `snooze ${entry.name}: --${flag} is too long: ${limit}, not "720h"`,
      });
    }
  }
  expect(checked).toEqual(
    expect.arrayContaining([
      "serve --shutdown-grace",
      "serve --stop-grace",
      "wake --timeout",
      "status --interval",
      "activator --stats-interval",
      "autoscaler --lease-duration",
      "webhooks --cert-resync",
    ]),
  );
});

test("the limit itself is taken, and a certificate's lifetime may be longer", async () => {
  // 596h31m23.647s is the limit exactly; the refusal names no example that is refused.
  output = [];
  expect(await main(["status", "--interval", "596h31m23.647s", "--url", "http://127.0.0.1:1"])).toBe(1);
  expect(output.join("\n")).toContain("cannot reach http://127.0.0.1:1");
  output = [];
  expect(await main(["status", "--interval", "soon"])).toBe(2);
  expect(output[0]).toBe(
    'snooze status: --interval must be a duration like 250ms, 30s, 5m or 1h30m, not "soon"',
  );
  output = [];
  expect(await main(["status", "--interval", "100ms"])).toBe(2);
  expect(output[0]).toBe('snooze status: --interval must be at least 200ms, not "100ms"');
  output = [];
  expect(await main(["wake", "qwen", "--timeout", "0"])).toBe(2);
  expect(output[0]).toBe('snooze wake: --timeout must be longer than 0, not "0"');
  output = [];
  expect(await main(["wake", "qwen", "--timeout", "0.4ms"])).toBe(2);
  expect(output[0]).toBe('snooze wake: --timeout must be at least 1ms, not "0.4ms"');
  output = [];
  // A lifetime over the timer's limit gets past the flags to the cluster it cannot find.
  expect(
    await main([
      "webhooks",
      "--ca-validity",
      "87600h",
      "--cert-validity",
      "8760h",
      "--kubeconfig",
      "/nonexistent/kubeconfig",
    ]),
  ).toBe(2);
  expect(output[0]).not.toContain("validity");
});

test("a port is decimal digits, 1 to 65535 (0: any free port): not hex, an exponent or spaces", async () => {
  // Found by an outside tester: `--port 0x4650` listened on 18000; `1e4` and " 18104" were taken.
  for (const port of ["0x4650", "1e4", " 18104", "18104 ", "65536", "+80", "80.0", "", "0o17"]) {
    output = [];
    expect(await main(["serve", "--port", port, "--config", "/nonexistent/snooze.yaml"])).toBe(2);
    expect(output.join("\n")).toContain(
      `--port must be a port number, 1 to 65535 in decimal digits (0: any free port), not "${port}"`,
    );
  }
  expect(await main(["autoscaler", "--grpc-port", "0x10"])).toBe(2);
  expect(output.join("\n")).toContain("--grpc-port must be a port number, 1 to 65535 in decimal digits");
  // Found by an outside tester: `snooze serve --port 1` served, and `snooze status` could not
  // reach it ("bad port"): the ports fetch blocks are refused where clients fetch, not for webhooks.
  for (const command of ["serve", "activator", "autoscaler"])
    for (const port of ["6000", "1", "10080"]) {
      output = [];
      expect(await main([command, "--port", port])).toBe(2);
      expect(output.join("\n")).toContain(
        `--port ${port} is a port that browsers and fetch will not connect to (the Fetch standard's bad ports)`,
      );
    }
  // Taken: the port then fails on its settings file, not on the port.
  for (const port of ["0", "18104", "65535"]) {
    output = [];
    expect(await main(["serve", "--port", port, "--config", "/nonexistent/snooze.yaml"])).toBe(2);
    expect(output.join("\n")).toContain("the settings file is not valid");
  }
});

test("every server command refuses an empty --host, and brackets around what is not an IPv6 address: exit 2", async () => {
  // `--host "$HOST"` with HOST unset listened on every interface; `[::1]` is taken as `::1`.
  for (const name of ["serve", "activator", "autoscaler", "webhooks"]) {
    const command = await commands.find((entry) => entry.name === name)!.load();
    for (const [host, said] of [
      ["", '--host is empty: name the address to listen on (127.0.0.1; 0.0.0.0 or "::" for every interface)'],
      [
        "[127.0.0.1]",
        "--host [127.0.0.1]: only an IPv6 address is written in brackets (as in a URL), not 127.0.0.1",
      ],
    ]) {
      output = [];
      expect(await main([name, "--host", host!, ...goNowhere(command.flags, command.positionals)])).toBe(2);
      expect(output[0]).toBe(`snooze ${name}: ${said}`);
    }
  }
});
