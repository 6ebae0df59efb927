import { createRequire } from "node:module";
import type * as PromClient from "prom-client";

/**
 * The four prom-client classes Snooze uses, each from its own file. prom-client's index loads all of
 * it: the push gateway (https, tls), the cluster aggregator, the summary's t-digest and the default
 * metrics, which require OpenTelemetry's API a second time, as CommonJS beside the ES module Snooze
 * imports. About 90 modules and 2 MiB of an idle `snooze serve` (issue 14). The files are the same
 * that index requires, so a `Registry` from either is one class.
 */
const require = createRequire(import.meta.url);

export const Registry: typeof PromClient.Registry = require("prom-client/lib/registry");
export const Counter: typeof PromClient.Counter = require("prom-client/lib/counter");
export const Gauge: typeof PromClient.Gauge = require("prom-client/lib/gauge");
export const Histogram: typeof PromClient.Histogram = require("prom-client/lib/histogram");

export type Registry = PromClient.Registry;
export type Counter<T extends string = string> = PromClient.Counter<T>;
export type Gauge<T extends string = string> = PromClient.Gauge<T>;
export type Histogram<T extends string = string> = PromClient.Histogram<T>;
