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
// Cache compiled code (and, since Node 24, the type-stripped TypeScript) on disk: a later run of
// any command loads neither the type stripper (~18 MiB RSS) nor recompiles, which is most of what
// an idle `snooze sim` engine cost above a bare Node (issue 14). NODE_COMPILE_CACHE picks the
// directory (default: Node's own, under the OS temp dir); NODE_DISABLE_COMPILE_CACHE=1 turns it off.
const { enableCompileCache } = await import("node:module");
enableCompileCache?.();
// Before any command loads: zod without the 62 locales its every entry point re-exports and Snooze
// never uses (lib/zod-locales-hook.ts; issue 14).
await import("../lib/zod-locales-hook.ts");
const { main } = await import("../cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
