/**
 * Preloaded with `node --import` by cli/loaded-modules.test.ts: records the URL of every module the
 * process loads (ESM and CommonJS alike, through Node's in-thread loader hooks) and writes the list,
 * one a line, to the file named by SNOOZE_MODULE_LIST when the process exits, followed by Node's own
 * internal modules (`process.moduleLoadList`, as `internal:<name>`: the hooks do not see those, and
 * some are heavy, such as the undici bundled for fetch and WebSocket). What a command loads is then
 * a fact the test reads, not a timing.
 */
import { writeFileSync } from "node:fs";
import { registerHooks } from "node:module";

const loaded = new Set<string>();
registerHooks({
  load(url, context, nextLoad) {
    loaded.add(url);
    return nextLoad(url, context);
  },
});
const file = process.env.SNOOZE_MODULE_LIST;
// Undocumented but stable since Node 0.x; not in @types/node.
const internal = () =>
  (process as unknown as { moduleLoadList: string[] }).moduleLoadList.map(
    (entry) => `internal:${entry.replace(/^\S+ /, "")}`,
  );
if (file) process.on("exit", () => writeFileSync(file, [...loaded, ...internal()].join("\n")));
