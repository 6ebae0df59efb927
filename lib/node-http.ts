/**
 * `node:http` without its ES-module facade, for the modules that create servers or requests.
 * `import … from "node:http"` builds a namespace of every export and so reads `http.WebSocket`,
 * `CloseEvent` and `MessageEvent`, lazy getters that load Node's bundled undici: about 12 MiB of
 * RSS (6 MiB anonymous) in every process, before any request (issue 14: most of what an idle
 * `snooze sim` engine cost above a bare Node). The CommonJS exports object reads no getter until
 * one is used. Types still come from `import type … from "node:http"`, which loads nothing.
 * cli/loaded-modules.test.ts checks that sim and serve leave the bundled undici unloaded.
 */
export const http = process.getBuiltinModule("node:http");
