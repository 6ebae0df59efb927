import { afterEach, expect, test } from "vitest";
import { startActivator, type TestActivator } from "../test/abuse/harness.ts";
import { methodsOf } from "./server.ts";

let snooze: TestActivator | undefined;
afterEach(async () => {
  await snooze?.close();
  snooze = undefined;
});

test("every fixed route read with GET answers HEAD with GET's status and headers, and no body", async () => {
  // Found by an outside tester: `HEAD /favicon.ico` was a 405 where GET was a 204.
  snooze = await startActivator();
  const read = [...methodsOf].filter(([, methods]) => methods.split(", ").includes("GET"));
  expect(read.length).toBeGreaterThan(5);
  for (const [path, methods] of read) {
    if (path === "/snooze/v1/events/stream") {
      expect(methods, path).toBe("GET");
      continue;
    }
    expect(methods, path).toBe("GET, HEAD");
    const get = await fetch(`${snooze.url}${path}`);
    await get.arrayBuffer();
    const head = await fetch(`${snooze.url}${path}`, { method: "HEAD" });
    expect(head.status, path).toBe(get.status);
    expect(head.headers.get("content-type"), path).toBe(get.headers.get("content-type"));
    expect((await head.arrayBuffer()).byteLength, path).toBe(0);
  }
});
