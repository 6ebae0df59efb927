import type { Logger } from "../log.ts";
import { Counter, type Registry } from "../prometheus.ts";
import { isNotFound } from "./client.ts";
import { type CorrelatorOptions, EventCorrelator } from "./event-correlator.ts";

/** What an Event is about (events.k8s.io/v1 `regarding`). */
export interface ObjectReference {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
}

export interface EventToRecord {
  type: "Normal" | "Warning";
  reason: string;
  action: string;
  note: string;
}

/** What the recorder needs of a Kubernetes client. */
export interface EventWriter {
  create<T>(path: string, body: unknown): Promise<T>;
  patch<T>(path: string, body: unknown): Promise<T>;
}

export interface EventRecorderOptions {
  client: EventWriter;
  /** events.k8s.io/v1 `reportingController`: a qualified name, like `snooze.dev/autoscaler`. */
  reportingController: string;
  /** `reportingInstance`: this replica (its pod name). */
  reportingInstance: string;
  log: Logger;
  registry: Registry;
  now?: () => number;
  /** Writes waiting at most; past it, Events are dropped and counted. */
  maxQueued?: number;
  correlator?: CorrelatorOptions;
}

const eventsPath = (namespace: string) => `/apis/events.k8s.io/v1/namespaces/${namespace}/events`;
/** MicroTime: RFC 3339 with exactly six fractional digits, as the apiserver parses it. */
const microTime = (ms: number) => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");

interface Write {
  regarding: ObjectReference;
  event: EventToRecord;
  object: string;
  key: string;
  correlation: Exclude<ReturnType<EventCorrelator["observe"]>, { kind: "drop" }>;
  at: number;
}

/**
 * Records Kubernetes Events (events.k8s.io/v1) the way client-go's recorder does: isomorphic Events
 * become one Event with a `series`, a token bucket per object drops a flood (event-correlator.ts),
 * and writes go out one at a time from a bounded queue, so `record` never blocks and never throws;
 * a failed write is logged and counted in `snooze_kube_events_total`.
 */
export class EventRecorder {
  private readonly options: EventRecorderOptions;
  private readonly correlator: EventCorrelator;
  private readonly now: () => number;
  private readonly outcomes: Counter;
  private readonly queue: Write[] = [];
  private writing = false;
  private idle?: Promise<void>;
  private settle?: () => void;

  constructor(options: EventRecorderOptions) {
    this.options = options;
    this.correlator = new EventCorrelator(options.correlator);
    this.now = options.now ?? Date.now;
    this.outcomes = new Counter({
      name: "snooze_kube_events_total",
      help: "Kubernetes Events on Models, by reason and outcome: created, counted (a repeat in an Event's series), dropped (rate limit or queue full), failed (the write was refused).",
      labelNames: ["reason", "outcome"],
      registers: [options.registry],
    });
  }

  record(regarding: ObjectReference, event: EventToRecord): void {
    const object = regarding.uid ?? `${regarding.namespace}/${regarding.name}`;
    const key = `${event.reason}\u0000${event.action}\u0000${this.options.reportingController}`;
    const at = this.now();
    const correlation = this.correlator.observe(object, key, regarding.name, at);
    if (correlation.kind === "drop" || this.queue.length >= (this.options.maxQueued ?? 100)) {
      this.outcomes.inc({ reason: event.reason, outcome: "dropped" });
      return;
    }
    this.queue.push({ regarding, event, object, key, correlation, at });
    void this.pump();
  }

  /** Resolves once every queued write is done (tests; shutdown). */
  async flushed(): Promise<void> {
    await this.idle;
  }

  private async pump(): Promise<void> {
    if (this.writing) return;
    this.writing = true;
    this.idle = new Promise((resolve) => (this.settle = resolve));
    try {
      for (let write = this.queue.shift(); write; write = this.queue.shift()) await this.write(write);
    } finally {
      this.writing = false;
      this.settle?.();
    }
  }

  private async write(write: Write): Promise<void> {
    const { regarding, event, correlation } = write;
    const path = eventsPath(regarding.namespace);
    try {
      if (correlation.kind === "series") {
        try {
          await this.options.client.patch(`${path}/${correlation.name}`, {
            series: { count: correlation.count, lastObservedTime: microTime(correlation.lastObservedTime) },
          });
          this.outcomes.inc({ reason: event.reason, outcome: "counted" });
          return;
        } catch (error) {
          if (!isNotFound(error)) throw error;
          // The series' Event is gone: this one starts a new series.
          this.correlator.forget(write.object, write.key);
          const fresh = this.correlator.observe(write.object, write.key, regarding.name, write.at);
          if (fresh.kind !== "create") return;
          await this.create(path, fresh.name, write);
          return;
        }
      }
      await this.create(path, correlation.name, write);
    } catch (error) {
      this.outcomes.inc({ reason: event.reason, outcome: "failed" });
      this.options.log.warn("could not record a Kubernetes Event", {
        object: `${regarding.namespace}/${regarding.name}`,
        reason: event.reason,
        error,
      });
    }
  }

  private async create(path: string, name: string, { regarding, event, at }: Write): Promise<void> {
    await this.options.client.create(path, {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      metadata: { name, namespace: regarding.namespace },
      eventTime: microTime(at),
      reportingController: this.options.reportingController,
      reportingInstance: this.options.reportingInstance,
      regarding,
      type: event.type,
      reason: event.reason,
      action: event.action,
      // The apiserver refuses a note over 1 kB.
      note: event.note.length > 1_000 ? `${event.note.slice(0, 997)}...` : event.note,
    });
    this.outcomes.inc({ reason: event.reason, outcome: "created" });
  }
}
