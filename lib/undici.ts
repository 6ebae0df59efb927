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
 *
 * They load at the first call of `undici()`, not with this module: a `snooze serve` that has not
 * yet called an engine or forwarded a request needs no HTTP client, and these 30 modules bring
 * Node's `http2` and `tls` (undici's client requires its HTTP/2 half at load), about 4 MiB of an
 * idle serve's RSS (issue 14). In `snooze serve` the first engine call, a cold start's first health
 * check while the engine boots, loads them, synchronously (25–50 ms on a loaded 2-core machine);
 * `snooze activator` and `snooze autoscaler`, whose first use may be a held request's release or a
 * wake, load them at start.
 */
export interface Dispatchers {
  Pool: typeof Undici.Pool;
  Agent: typeof Undici.Agent;
  /** The connector a Pool builds from its `connect` options, for a Pool given a connector of its own. */
  buildConnector: typeof Undici.buildConnector;
}
export type Pool = Undici.Pool;
export type Agent = Undici.Agent;

let loaded: Dispatchers | undefined;

export function undici(): Dispatchers {
  if (loaded) return loaded;
  const require = createRequire(import.meta.url);
  const dispatcher = require("undici/lib/dispatcher/dispatcher.js") as { prototype: object };
  Object.assign(dispatcher.prototype, require("undici/lib/api/index.js"));
  loaded = {
    Pool: require("undici/lib/dispatcher/pool.js"),
    Agent: require("undici/lib/dispatcher/agent.js"),
    buildConnector: require("undici/lib/core/connect.js"),
  };
  return loaded;
}
