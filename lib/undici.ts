import { createRequire } from "node:module";
import type * as Undici from "undici";

/**
 * undici's `Pool` and `Agent` without the rest of the package. `import … from "undici"` loads all
 * of it (fetch, WebSocket, the cache stores, mocks, proxies: 109 modules, about 12 MiB of RSS on a
 * bare Node; issue 14), where the activator and the event sink use two dispatchers and their
 * `request`. This loads just those modules and attaches the request API to the dispatcher
 * prototype, which is all undici's own index.js does for them (`Object.assign(Dispatcher.prototype,
 * api)`), so the classes are the very ones the package exports (same files, one module cache) and
 * its types apply. undici is pinned in package.json; lib/undici.test.ts fails if a new version
 * moves these files or changes what index.js does for them.
 */
const require = createRequire(import.meta.url);
const dispatcher = require("undici/lib/dispatcher/dispatcher.js") as { prototype: object };
Object.assign(dispatcher.prototype, require("undici/lib/api/index.js"));

export const Pool = require("undici/lib/dispatcher/pool.js") as typeof Undici.Pool;
export type Pool = Undici.Pool;
export const Agent = require("undici/lib/dispatcher/agent.js") as typeof Undici.Agent;
export type Agent = Undici.Agent;
/** The connector a Pool builds from its `connect` options, for a Pool given a connector of its own. */
export const buildConnector = require("undici/lib/core/connect.js") as typeof Undici.buildConnector;
