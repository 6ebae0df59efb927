import { fileURLToPath } from "node:url";
import {
  loadPackageDefinition,
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceDefinition,
  type sendUnaryData,
  status,
} from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { clip } from "../../lib/clip.ts";
import { latestStateWriter } from "../../lib/http/latest-state-writer.ts";
import type { Logger } from "../../lib/log.ts";
import { Counter, type Registry } from "../../lib/prometheus.ts";
import { boundedService, maxMetadataEntries } from "./metadata-bound.ts";
import { DemandError, type DemandSample, type ModelDemand } from "./model-demand.ts";
import { RepeatGate } from "./repeat-gate.ts";
import { type RepushPeriods, repushDue, repushTickMs } from "./repush.ts";
import { defaultStreamLimits, peerHost, StreamCap, type StreamLimits } from "./stream-cap.ts";

/**
 * KEDA's external scaler protocol (`externalscaler.proto`, vendored beside this file), served by
 * `snooze autoscaler` so a ScaledObject can scale a Model on its demand: the requests at once its
 * arrivals need, arrival rate × service time (demand-metric.ts), not the backlog held while new
 * replicas warm up. Works for both trigger types, `external` (KEDA polls
 * IsActive and GetMetrics) and `external-push` (StreamIsActive: "active" is pushed the moment a
 * request is held, so 0 → 1 does not wait for KEDA's polling interval). Any autoscaler replica
 * answers; one that does not hold the Model's Lease asks the one that does.
 *
 * The trigger's metadata (KEDA passes all of it as `scalerMetadata`):
 *   scalerAddress   KEDA's own: where this server listens (`snooze-autoscaler.snooze-system:9090`)
 *   model           the Model: its name in the ScaledObject's namespace, or `namespace/name`
 *   targetDemand    demand one awake replica is meant for (the HPA's AverageValue target);
 *                   default: the Model's `concurrency` when set, else 1
 * Any other key is refused (INVALID_ARGUMENT naming it), as is a Model that does not exist
 * (NOT_FOUND naming `model`). KEDA's `enableTLS`, `unsafeSsl` and keys ending in `FromEnv` (KEDA
 * resolves `modelFromEnv` to the value of that environment variable of the target) are known.
 */
export const demandMetricName = "snooze-demand";

/** The trigger metadata keys KEDA itself reads from an external scaler's trigger. */
const kedaKeys = new Set(["scalerAddress", "enableTLS", "unsafeSsl"]);
const ownKeys = ["model", "targetDemand"] as const;

export interface ScaledObjectRef {
  name?: string;
  namespace?: string;
  scalerMetadata?: Record<string, string>;
  /** Set, with no metadata, when the metadata had too many entries to decode (metadata-bound.ts). */
  metadataEntries?: number;
}

export interface ScalerTarget {
  /** The Model, `namespace/name`. */
  key: string;
  /** Explicit targetDemand, when the trigger sets one. */
  targetDemand?: number;
}

/** A request the scaler refuses, with the gRPC code and a message that names the field. */
export class ScalerInputError extends Error {
  readonly code: status;
  readonly field: string;
  constructor(code: status, field: string, message: string) {
    super(`${field}: ${message}`);
    this.code = code;
    this.field = field;
  }
}

/** A Model's name: a DNS-1123 subdomain, as the apiserver takes a custom resource's name. */
const dns1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const maxNameLength = 253;
/** A namespace's name: a DNS-1123 label (no dots, at most 63 characters). */
const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const maxNamespaceLength = 63;
const isNamespace = (text: string) => text.length <= maxNamespaceLength && dnsLabel.test(text);

/**
 * The targetDemand KEDA can hand on. It gives the HPA the target in thousandths as a 64-bit integer
 * (`int64(targetSizeFloat * 1000)`, KEDA v2.21.0's GetMetricTargetMili): below a thousandth that is
 * 0, and far above this it overflows, and the HPA refuses either ("must be positive"), so KEDA's
 * HPA was never made or updated while this scaler had accepted the trigger.
 */
const targetDemandRange = { min: 0.001, max: 1e12 } as const;

/**
 * What a trigger wrote, as a message quotes it: the start of it. The message is the status's
 * grpc-message trailer, and a 1 MB key quoted whole made a trailer the client refused (a protocol
 * error instead of the field, and the channel's next calls failed too; found by an outside tester).
 */
const quoted = (text: string) => clip(text, 100);

/** Reads a ScaledObjectRef's metadata; throws ScalerInputError naming the first bad field. */
export function scalerTargetOf(ref: ScaledObjectRef): ScalerTarget {
  if (ref.metadataEntries !== undefined)
    throw new ScalerInputError(
      status.INVALID_ARGUMENT,
      "scalerMetadata",
      `${ref.metadataEntries} entries, more than ${maxMetadataEntries}: not read; a trigger's metadata is a few keys (model, targetDemand and KEDA's own)`,
    );
  const metadata = ref.scalerMetadata ?? {};
  const values: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata)) {
    if (kedaKeys.has(key)) continue;
    const plain = key.endsWith("FromEnv") ? key.slice(0, -"FromEnv".length) : key;
    if (!(ownKeys as readonly string[]).includes(plain))
      throw new ScalerInputError(
        status.INVALID_ARGUMENT,
        `scalerMetadata.${quoted(key)}`,
        `unknown field; Snooze's external scaler reads ${ownKeys.join(" and ")} (and KEDA's scalerAddress, enableTLS, unsafeSsl)`,
      );
    if (plain === key || values[plain] === undefined) values[plain] = value;
  }
  const model = values.model?.trim();
  if (!model)
    throw new ScalerInputError(
      status.INVALID_ARGUMENT,
      "scalerMetadata.model",
      "required: the Model this ScaledObject scales, by name (in the ScaledObject's namespace) or namespace/name",
    );
  const parts = model.split("/");
  const name = parts.at(-1) ?? "";
  if (
    parts.length > 2 ||
    name.length > maxNameLength ||
    !dns1123.test(name) ||
    (parts.length === 2 && !isNamespace(parts[0]!))
  )
    throw new ScalerInputError(
      status.INVALID_ARGUMENT,
      "scalerMetadata.model",
      `"${quoted(model)}" is not a Model name or namespace/name (a name of at most ${maxNameLength} characters, a namespace of at most ${maxNamespaceLength} without dots)`,
    );
  let key = model;
  if (parts.length === 1) {
    if (!ref.namespace)
      throw new ScalerInputError(
        status.INVALID_ARGUMENT,
        "namespace",
        `the ScaledObject's namespace is empty, so "${quoted(model)}" names no Model; write namespace/name`,
      );
    if (!isNamespace(ref.namespace))
      throw new ScalerInputError(
        status.INVALID_ARGUMENT,
        "namespace",
        `"${quoted(ref.namespace)}" is not a namespace, so "${quoted(model)}" names no Model; write namespace/name`,
      );
    key = `${ref.namespace}/${model}`;
  }
  let targetDemand: number | undefined;
  if (values.targetDemand !== undefined) {
    targetDemand = Number(values.targetDemand);
    if (!Number.isFinite(targetDemand) || targetDemand <= 0 || values.targetDemand.trim() === "")
      throw new ScalerInputError(
        status.INVALID_ARGUMENT,
        "scalerMetadata.targetDemand",
        `must be a positive number (requests one awake replica is meant for), not "${quoted(values.targetDemand)}"`,
      );
    if (targetDemand < targetDemandRange.min || targetDemand > targetDemandRange.max)
      throw new ScalerInputError(
        status.INVALID_ARGUMENT,
        "scalerMetadata.targetDemand",
        `must be between ${targetDemandRange.min} and ${targetDemandRange.max}, not "${quoted(values.targetDemand)}": KEDA hands the HPA the target in thousandths, so less reads as 0 and much more overflows, and the HPA refuses both`,
      );
  }
  return { key, targetDemand };
}

export interface ExternalScalerOptions {
  demand: ModelDemand;
  /** The default targetDemand of a Model: its `concurrency` when set (> 0), else 1. */
  perReplica(key: string): number | undefined;
  log: Logger;
  registry: Registry;
  /** While a request is held and "active" stands, it is pushed again this often (KEDA may have missed one). */
  repushMs?: number;
  /**
   * While "active" stands and the Model is still at spec.replicas 0, it is pushed again this often:
   * KEDA acts on a push once, and its scale write can lose a conflict (409) with a status write of
   * the waking Model; it does not retry until the next push or poll.
   */
  zeroRepushMs?: number;
  /**
   * How often the server pings a connection, and how long it waits for the answer before closing
   * it (default 60 s, and 20 s for the answer). An inactive stream is written to only when its
   * result changes, so without pings a peer that vanished without closing (its node lost, a
   * partition) kept its streams, their watches and timers for good (found by an outside tester).
   */
  keepaliveMs?: number;
  /** StreamIsActive streams open at once, in all and per client address (stream-cap.ts). */
  streamLimits?: StreamLimits;
}

/**
 * Calls one HTTP/2 connection may have in flight beyond the streams one client may hold: KEDA's
 * operator sends its IsActive and GetMetricSpec calls on the connection its streams are on, and a
 * grpc-go client that reaches the server's limit waits for a stream to end, which a StreamIsActive
 * never does. So the limit per connection is a client's streams plus room for those calls.
 */
const unaryHeadroom = 1_024;

const protoPath = fileURLToPath(new URL("./externalscaler.proto", import.meta.url));

interface IsActiveResponse {
  result: boolean;
}

/** TLS of the gRPC port, as PEM: the serving certificate (chain) and key, and optionally the CA of KEDA's client certificates. */
export interface ScalerTls {
  cert: Buffer;
  key: Buffer;
  clientCa?: Buffer;
}

/** The gRPC server; `listen` binds it, `close` stops it (open streams end). */
export class ExternalScalerServer {
  private readonly options: ExternalScalerOptions;
  private readonly log: Logger;
  private readonly server: Server;
  private readonly streams = new Set<AbortController>();
  private readonly cap: StreamCap;
  /** Refusals and failures logged lately: a repeat is said once a minute (counted meanwhile). */
  private readonly repeats = new RepeatGate({ everyMs: 60_000, maxKeys: 1_024 });
  /** A refusal was logged and no stream has opened since: the next ones are only counted. */
  private refusing = false;
  private readonly calls: Counter<"method" | "code">;
  private readonly pushes: Counter<"result">;
  private readonly repush: RepushPeriods;

  constructor(options: ExternalScalerOptions) {
    this.options = options;
    this.log = options.log;
    this.repush = { repushMs: options.repushMs ?? 2_000, zeroRepushMs: options.zeroRepushMs ?? 250 };
    const keepaliveMs = options.keepaliveMs ?? 60_000;
    const limits = options.streamLimits ?? defaultStreamLimits;
    this.cap = new StreamCap(limits);
    this.server = new Server({
      "grpc.keepalive_time_ms": keepaliveMs,
      "grpc.keepalive_timeout_ms": Math.min(20_000, keepaliveMs),
      "grpc.max_concurrent_streams": limits.perPeer + unaryHeadroom,
    });
    this.calls = new Counter({
      name: "snooze_external_scaler_calls_total",
      help: "KEDA external scaler calls answered, by method and gRPC status code.",
      labelNames: ["method", "code"],
      registers: [options.registry],
    });
    this.pushes = new Counter({
      name: "snooze_external_scaler_pushes_total",
      help: "IsActive results pushed on StreamIsActive streams (external-push), by result.",
      labelNames: ["result"],
      registers: [options.registry],
    });
    const definition = loadSync(protoPath, { keepCase: true, longs: Number, defaults: true });
    const loaded = loadPackageDefinition(definition) as unknown as {
      externalscaler: { ExternalScaler: { service: ServiceDefinition } };
    };
    const service = boundedService(loaded.externalscaler.ExternalScaler.service);
    this.server.addService(service, {
      IsActive: (
        call: ServerUnaryCall<ScaledObjectRef, IsActiveResponse>,
        done: sendUnaryData<IsActiveResponse>,
      ) =>
        this.unary("IsActive", call.request, done, async (target) => ({
          result: (await this.sample(target, "active")).active,
        })),
      GetMetricSpec: (call: ServerUnaryCall<ScaledObjectRef, unknown>, done: sendUnaryData<unknown>) =>
        this.unary("GetMetricSpec", call.request, done, async (target) => {
          const size = await this.targetSize(target);
          return {
            metricSpecs: [
              {
                metricName: demandMetricName,
                targetSize: Math.max(1, Math.round(size)),
                targetSizeFloat: size,
              },
            ],
          };
        }),
      GetMetrics: (
        call: ServerUnaryCall<{ scaledObjectRef?: ScaledObjectRef; metricName?: string }, unknown>,
        done: sendUnaryData<unknown>,
      ) =>
        this.unary("GetMetrics", call.request.scaledObjectRef ?? {}, done, async (target) => {
          const name = call.request.metricName ?? "";
          if (name !== demandMetricName)
            throw new ScalerInputError(
              status.INVALID_ARGUMENT,
              "metricName",
              `unknown metric "${quoted(name)}"; this scaler serves ${demandMetricName}`,
            );
          const sample = await this.sample(target, "count");
          return {
            metricValues: [
              {
                metricName: demandMetricName,
                metricValue: Math.round(sample.demand),
                metricValueFloat: sample.demand,
              },
            ],
          };
        }),
      StreamIsActive: (call: ServerWritableStream<ScaledObjectRef, IsActiveResponse>) => this.stream(call),
    });
  }

  /**
   * Binds `host:port` (port 0: any free one); resolves to the port bound. With `tls` the port
   * speaks only TLS (KEDA's trigger then sets `enableTLS` or `caCert`), and with `tls.clientCa` it
   * also requires a client certificate signed by that CA (the trigger's `tlsClientCert`/`tlsClientKey`).
   */
  listen(host: string, port: number, tls?: ScalerTls): Promise<number> {
    const credentials = tls
      ? ServerCredentials.createSsl(
          tls.clientCa ?? null,
          [{ private_key: tls.key, cert_chain: tls.cert }],
          tls.clientCa !== undefined,
        )
      : ServerCredentials.createInsecure();
    return new Promise((resolve, reject) => {
      const address = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
      this.server.bindAsync(address, credentials, (error, bound) => (error ? reject(error) : resolve(bound)));
    });
  }

  /** Ends open streams (KEDA reconnects elsewhere) and stops within `graceMs`. */
  async close(graceMs = 2_000): Promise<void> {
    for (const stream of this.streams) stream.abort();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * The Model's demand. `need`: what the caller must know; a leader that just took over knows that
   * a held request it was told of is there (active), not yet how many others (UNAVAILABLE: KEDA
   * keeps its last value and retries).
   */
  private async sample(target: ScalerTarget, need: "active" | "count"): Promise<DemandSample> {
    let sample: DemandSample;
    try {
      sample = await this.options.demand.sample(target.key);
    } catch (error) {
      throw this.translate(error);
    }
    if (sample.settling && (need === "count" || !sample.active))
      throw new ScalerInputError(
        status.UNAVAILABLE,
        "scalerMetadata.model",
        `the autoscaler leading Model ${target.key} just took over; its activators report within a second`,
      );
    return sample;
  }

  /**
   * The target of the Model's metric: the trigger's targetDemand, else the Model's own. A Model
   * that does not exist is NOT_FOUND either way, as IsActive and GetMetrics say it: with a
   * targetDemand the spec was given all the same, and KEDA made an HPA for a mistyped `model`.
   */
  private async targetSize(target: ScalerTarget): Promise<number> {
    const perReplica = this.options.perReplica(target.key);
    if (perReplica === undefined)
      throw new ScalerInputError(
        status.NOT_FOUND,
        "scalerMetadata.model",
        `no Model ${target.key} is known to the autoscaler`,
      );
    return target.targetDemand ?? perReplica;
  }

  private translate(error: unknown): Error {
    if (error instanceof DemandError)
      return error.code === "not-found"
        ? new ScalerInputError(status.NOT_FOUND, "scalerMetadata.model", error.message)
        : new ScalerInputError(status.UNAVAILABLE, "scalerMetadata.model", error.message);
    return error as Error;
  }

  private unary<T>(
    method: string,
    ref: ScaledObjectRef,
    done: sendUnaryData<T>,
    answer: (target: ScalerTarget) => Promise<T>,
  ): void {
    let target: ScalerTarget;
    try {
      target = scalerTargetOf(ref);
    } catch (error) {
      this.fail(method, ref, error, (e) => done(e));
      return;
    }
    answer(target).then(
      (value) => {
        this.calls.inc({ method, code: "OK" });
        done(null, value);
      },
      (error: unknown) => this.fail(method, ref, error, (e) => done(e)),
    );
  }

  private fail(
    method: string,
    ref: ScaledObjectRef,
    error: unknown,
    send: (e: { code: status; details: string }) => void,
  ): void {
    const input = error instanceof ScalerInputError ? error : undefined;
    const code = input?.code ?? status.INTERNAL;
    this.calls.inc({ method, code: status[code] ?? String(code) });
    const details = input?.message ?? `internal error: ${(error as Error)?.message ?? String(error)}`;
    const scaledObject = quoted(`${ref.namespace ?? ""}/${ref.name ?? ""}`);
    // KEDA asks again at every poll: the same refusal is said once, then once a minute with the count.
    const said = this.repeats.pass(`${method} ${code} ${scaledObject} ${details}`, performance.now());
    if (said) {
      const where = {
        method,
        scaledObject,
        error: details,
        ...(said.repeated > 0 ? { repeated: said.repeated } : {}),
        ...(said.unsaid ? { unsaidOthers: said.unsaid } : {}),
      };
      if (input && input.code !== status.UNAVAILABLE) this.log.info("refused a KEDA request", where);
      else this.log.warn("could not answer KEDA", where);
    }
    send({ code, details });
  }

  /**
   * StreamIsActive: the current result at once, then each change; "true" again on every new hold,
   * every zeroRepushMs while the Model waits at spec.replicas 0, and every repushMs while held.
   */
  private stream(call: ServerWritableStream<ScaledObjectRef, IsActiveResponse>): void {
    let target: ScalerTarget;
    try {
      target = scalerTargetOf(call.request);
    } catch (error) {
      this.fail("StreamIsActive", call.request, error, (e) => call.emit("error", e));
      return;
    }
    const peer = peerHost(call.getPeer());
    const slot = this.cap.open(peer);
    if ("refusal" in slot) {
      this.calls.inc({ method: "StreamIsActive", code: "RESOURCE_EXHAUSTED" });
      // Logged once until a stream opens again: a client retrying in a loop must not flood the log.
      if (!this.refusing)
        this.log.warn("refused a StreamIsActive stream: too many open", { peer, error: slot.refusal });
      this.refusing = true;
      call.emit("error", { code: status.RESOURCE_EXHAUSTED, details: slot.refusal });
      return;
    }
    this.refusing = false;
    const abort = new AbortController();
    this.streams.add(abort);
    call.on("cancelled", () => abort.abort());
    call.on("close", () => abort.abort());
    let last: boolean | undefined;
    let lastAt = 0;
    let latest: DemandSample | undefined;
    // At the client's pace: one that stops reading (its HTTP/2 window shut) gets the latest result
    // when it reads again; writing every push regardless buffered all of them here, without end.
    const writer = latestStateWriter(
      call,
      (result: boolean): IsActiveResponse => ({ result }),
      (_waiting, newer) => newer,
    );
    const send = (result: boolean) => {
      this.pushes.inc({ result: String(result) });
      writer.send(result);
      last = result;
      lastAt = performance.now();
    };
    // Armed only while a repush may be due (active, and at zero or with requests held): thousands
    // of idle streams then cost no timer at all.
    let repush: NodeJS.Timeout | undefined;
    const follow = (sample: DemandSample) => {
      if (sample.active && (sample.atZero || sample.held > 0)) {
        repush ??= setInterval(() => {
          if (latest && !abort.signal.aborted && repushDue(latest, performance.now() - lastAt, this.repush))
            send(true);
        }, repushTickMs(this.repush));
      } else {
        clearInterval(repush);
        repush = undefined;
      }
    };
    void (async () => {
      try {
        for await (const { sample, poke } of this.options.demand.watch(target.key, abort.signal)) {
          latest = sample;
          follow(sample);
          // A new leader's "inactive" is not known yet; a request it was told of is.
          if (sample.settling && !sample.active) continue;
          if (sample.active !== last || (poke && sample.active)) send(sample.active);
        }
        this.calls.inc({ method: "StreamIsActive", code: "OK" });
        writer.end();
      } catch (error) {
        if (!abort.signal.aborted)
          this.fail("StreamIsActive", call.request, this.translate(error), (e) => call.emit("error", e));
      } finally {
        clearInterval(repush);
        this.streams.delete(abort);
        slot.release();
      }
    })();
  }
}
