import { expect, test } from "vitest";

// Snooze targets Node.js 24 LTS; the `node@24` devDependency must be the runtime
// that npm scripts and npx use, not the machine's older Node.
test("the suite runs on Node.js 24", () => {
  expect(process.versions.node.split(".")[0]).toBe("24");
});
