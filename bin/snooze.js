#!/usr/bin/env node
// The `snooze` executable. Node >= 22.18 runs the TypeScript sources directly
// (type stripping), so a checkout needs no build step after `npm ci`.
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  console.error(
    `snooze: Node.js ${process.versions.node} is too old; Snooze needs Node.js 24 LTS (>= 22.18). ` +
      "After `npm ci`, run it through `npm start` or `npx snooze`, which use the Node 24 in node_modules/.bin.",
  );
  process.exit(1);
}
const { main } = await import("../cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
