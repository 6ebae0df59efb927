import { randomUUID } from "node:crypto";
import { Counter, type Registry } from "prom-client";
import type { Logger } from "./log.ts";

/** A CloudEvent 1.0 in structured mode (application/cloudevents+json). */
export interface CloudEvent {
  specversion: "1.0";
  id: string;
  source: string;
  type: string;
  subject?: string;
  time: string;
  datacontenttype: "application/json";
  data: unknown;
}

const maxPending = 100;

/**
 * Sends CloudEvents to a sink (a Knative Broker, or any HTTP endpoint) without
 * ever slowing the caller: at most `maxPending` deliveries in flight, the rest
 * are dropped and counted, since an event stream must not hold up a wake.
 */
export class CloudEventSink {
  private readonly url: string;
  private readonly source: string;
  private readonly log: Logger;
  private pending = 0;
  private readonly outcomes: Counter;

  constructor(url: string, source: string, log: Logger, registry: Registry) {
    this.url = url;
    this.source = source;
    this.log = log;
    this.outcomes = new Counter({
      name: "snooze_cloudevents_total",
      help: "CloudEvents sent to the sink, by type and outcome (delivered, failed, dropped).",
      labelNames: ["type", "outcome"],
      registers: [registry],
    });
  }

  emit(type: string, subject: string, data: unknown): void {
    if (this.pending >= maxPending) {
      this.outcomes.inc({ type, outcome: "dropped" });
      return;
    }
    const event: CloudEvent = {
      specversion: "1.0",
      id: randomUUID(),
      source: this.source,
      type,
      subject,
      time: new Date().toISOString(),
      datacontenttype: "application/json",
      data,
    };
    this.pending++;
    fetch(this.url, {
      method: "POST",
      headers: { "content-type": "application/cloudevents+json" },
      body: JSON.stringify(event),
      signal: AbortSignal.timeout(5_000),
    })
      .then(async (response) => {
        await response.body?.cancel();
        if (!response.ok) throw new Error(`the sink answered ${response.status}`);
        this.outcomes.inc({ type, outcome: "delivered" });
      })
      .catch((error: Error) => {
        this.outcomes.inc({ type, outcome: "failed" });
        this.log.warn("CloudEvent not delivered", { type, subject, error });
      })
      .finally(() => this.pending--);
  }
}
