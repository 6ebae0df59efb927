import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { KubeAutoscaler } from "../autoscaler/kube/autoscaler.ts";
import { createControlServer } from "../autoscaler/kube/control-server.ts";
import type { ScalerTls } from "../autoscaler/kube/external-scaler.ts";
import { serviceActivators } from "../autoscaler/kube/knative-ingress/activator-prober.ts";
import { KnativeIngressReconciler } from "../autoscaler/kube/knative-ingress/reconciler.ts";
import { CommandFailure, type FlagValues, UsageError } from "../lib/cli-flags.ts";
import { type EventMode, eventModes, sinkUrlProblem } from "../lib/cloudevents.ts";
import { knativeNetworkingServed } from "../lib/knative/networking-served.ts";
import { serviceAccountUser, TokenReviewer } from "../lib/kube/token-review.ts";
import { createLogger } from "../lib/log.ts";
import { Registry } from "../lib/prometheus.ts";
import { redactUrl } from "../lib/redact-url.ts";
import { byteSize } from "../lib/settings/fields.ts";
import { maxPemFileBytes, readSmallFileSync } from "../lib/small-file.ts";
import { startTelemetry } from "../lib/telemetry.ts";
import { undici } from "../lib/undici.ts";
import type { Command } from "./command.ts";
import { durationValue, hostValue, listenFailure, listenFlags, portValue } from "./flags.ts";
import { httpUrlValue, identityValue, kubeClientFrom, kubeFlags, ownAddress } from "./kube-flags.ts";
import { watchStopSignals } from "./signals.ts";

export const autoscalerCommand: Command = {
  name: "autoscaler",
  flags: {
    ...listenFlags(8090),
    ...kubeFlags,
    "grpc-port": {
      type: "string",
      default: "9090",
      description:
        "port of KEDA's external scaler gRPC protocol (on --host): each Model's demand, pushed to external-push triggers",
      placeholder: "port",
    },
    "grpc-tls-cert": {
      type: "string",
      description:
        "PEM certificate (chain) the gRPC port serves: with --grpc-tls-key it speaks only TLS (KEDA's trigger: enableTLS or caCert)",
      placeholder: "file",
    },
    "grpc-tls-key": {
      type: "string",
      description: "PEM private key of --grpc-tls-cert",
      placeholder: "file",
    },
    "grpc-client-ca": {
      type: "string",
      description:
        "PEM CA: the gRPC port then requires a client certificate it signed (KEDA's tlsClientCert and tlsClientKey); needs --grpc-tls-cert",
      placeholder: "file",
    },
    "allowed-callers": {
      type: "string",
      description:
        "comma-separated users (system:serviceaccount:NS:NAME) whose tokens may send demand, stats and admin actions (default: the snooze-activator and snooze-autoscaler ServiceAccounts of --lease-namespace)",
      placeholder: "users",
    },
    "lease-namespace": {
      type: "string",
      description: "namespace of the Leases (default: $POD_NAMESPACE, else snooze-system)",
      placeholder: "name",
    },
    identity: {
      type: "string",
      description: "holder identity in Leases (default: $POD_NAME, else the host name)",
      placeholder: "name",
    },
    "advertise-address": {
      type: "string",
      description: "URL other replicas forward demand to (default: http://$POD_IP:<port>)",
      placeholder: "url",
    },
    "lease-duration": {
      type: "string",
      default: "8s",
      description: "how long a Lease outlives its holder's last renewal",
      placeholder: "duration",
    },
    "lease-renew-deadline": {
      type: "string",
      default: "5s",
      description: "a holder that could not renew for this long stops acting",
      placeholder: "duration",
    },
    "lease-retry": {
      type: "string",
      default: "1s",
      description: "how often Leases are renewed or tried",
      placeholder: "duration",
    },
    "drain-grace": {
      type: "string",
      default: "1s",
      description: "time for activators to see a pod draining before its engine is checked for idleness",
      placeholder: "duration",
    },
    "shutdown-delay": {
      type: "string",
      default: "5s",
      description:
        "after SIGTERM, how long it still serves (KEDA's gRPC streams, the activators' demand, its Leases), /readyz answering 503, before it stops: time for Kubernetes to take the pod out of its Service's endpoints (a second signal ends it)",
      placeholder: "duration",
    },
    "event-sink": {
      type: "string",
      description:
        "URL tier changes go to as CloudEvents (default: $K_SINK, as a Knative SinkBinding sets it)",
      placeholder: "url",
    },
    "event-mode": {
      type: "string",
      default: "binary",
      description:
        "CloudEvents content mode: binary (ce-* headers) or structured (application/cloudevents+json)",
      placeholder: "mode",
    },
    "knative-ingress-service": {
      type: "string",
      default: "snooze-activator",
      description:
        "the activators' Service (in --lease-namespace) for Snooze's Knative ingress class: the load balancer KIngresses point at, whose endpoints are probed",
      placeholder: "name",
    },
    "knative-ingress-probe": {
      type: "string",
      description:
        "comma-separated activator URLs to probe for KIngress readiness instead of the Service's endpoints",
      placeholder: "urls",
    },
    "host-memory-budget": {
      type: "string",
      description: "host RAM the level-1 sleepers of one node may hold, like 64Gi (default: unlimited)",
      placeholder: "size",
    },
  },
  async run(values) {
    // undici's dispatchers now, not at the first engine call, which may be a wake (lib/undici.ts).
    undici();
    const port = portValue(values, "port", { fetched: true });
    const host = hostValue(values);
    const grpcPort = portValue(values, "grpc-port");
    // Said before connecting anywhere, rather than as the second listen's port in use.
    if (grpcPort === port && port !== 0)
      throw new UsageError(`--grpc-port ${grpcPort} is the --port too: the HTTP and gRPC ports must differ`);
    const timing = {
      durationMs: durationValue(values, "lease-duration", { positive: true }),
      renewDeadlineMs: durationValue(values, "lease-renew-deadline", { positive: true }),
      retryMs: durationValue(values, "lease-retry", { positive: true }),
    };
    // A holder must stop acting before anyone else may take its Lease, and renew more than once in time.
    if (!(timing.retryMs < timing.renewDeadlineMs && timing.renewDeadlineMs < timing.durationMs))
      throw new UsageError("--lease-retry < --lease-renew-deadline < --lease-duration must hold");
    const grpcTls = await grpcTlsOf(values);
    const drainGraceMs = durationValue(values, "drain-grace");
    // 0 is none: it stops serving at SIGTERM.
    const shutdownDelay = durationValue(values, "shutdown-delay");
    const eventSink = values["event-sink"] === undefined ? undefined : String(values["event-sink"]);
    if (eventSink !== undefined && sinkUrlProblem(eventSink))
      throw new UsageError(
        `--event-sink must be an http(s) URL, not "${redactUrl(eventSink)}": ${sinkUrlProblem(eventSink)}`,
      );
    const eventMode = String(values["event-mode"]);
    if (!(eventModes as readonly string[]).includes(eventMode))
      throw new UsageError(`--event-mode must be binary or structured, not "${eventMode}"`);
    let hostMemoryBudget: number | undefined;
    if (values["host-memory-budget"] !== undefined) {
      const parsed = byteSize.safeParse(String(values["host-memory-budget"]));
      if (!parsed.success)
        throw new UsageError(
          `--host-memory-budget must be a size like 64Gi, not "${values["host-memory-budget"]}"`,
        );
      hostMemoryBudget = parsed.data;
    }
    const activatorService = String(values["knative-ingress-service"]);
    const probeUrls =
      values["knative-ingress-probe"] === undefined
        ? undefined
        : String(values["knative-ingress-probe"])
            .split(",")
            .map((url) => url.trim().replace(/\/$/, ""))
            .filter(Boolean);
    if (probeUrls?.some((url) => !/^https?:\/\/./.test(url)))
      throw new UsageError(
        `--knative-ingress-probe must list http(s) URLs, not "${values["knative-ingress-probe"]}"`,
      );
    // Said before connecting: other replicas forward demand there.
    const advertised =
      values["advertise-address"] === undefined
        ? undefined
        : httpUrlValue(String(values["advertise-address"]), "--advertise-address");
    const identity = identityValue(values, hostname);
    const leaseNamespace = String(values["lease-namespace"] ?? process.env.POD_NAMESPACE ?? "snooze-system");
    const log = createLogger({ component: "autoscaler", identity });
    const { client, source } = await kubeClientFrom(values, "autoscaler");
    // Spans (snooze.activation, .wake, .swap ...) go out when the standard OTEL_* variables ask.
    const telemetry = await startTelemetry("snooze-autoscaler", log);
    const registry = new Registry();

    const autoscaler = new KubeAutoscaler({
      client,
      identity,
      leaseNamespace,
      namespace: values.namespace as string | undefined,
      leaseTiming: timing,
      drainGraceMs,
      eventSink,
      eventMode: eventMode as EventMode,
      hostMemoryBudget,
      log,
      registry,
    });
    const reviewer = new TokenReviewer(client, { allowed: allowedCallers(values, leaseNamespace) });
    const server = createControlServer(autoscaler, registry, {
      authenticate: (token) => reviewer.check(token),
    });
    try {
      server.listen(port, host);
      await once(server, "listening");
    } catch (error) {
      throw listenFailure(error, host, port) ?? error;
    }
    const actualPort = (server.address() as AddressInfo).port;
    const address =
      values["advertise-address"] === undefined
        ? `http://${process.env.POD_IP ?? ownAddress()}:${actualPort}`
        : advertised;
    log.info("starting", {
      server: redactUrl(client.server),
      credentials: source,
      address,
      port: actualPort,
    });
    // Loaded only here: other commands need not pay for gRPC and protobuf at start-up.
    const { ExternalScalerServer } = await import("../autoscaler/kube/external-scaler.ts");
    const scaler = new ExternalScalerServer({
      demand: autoscaler.modelDemand,
      perReplica: (key) => autoscaler.perReplica(key),
      log: log.child({ part: "external-scaler" }),
      registry,
    });
    let boundGrpcPort: number;
    try {
      boundGrpcPort = await scaler.listen(host, grpcPort, grpcTls);
    } catch (error) {
      // Every error of gRPC's bind is the port's: said in one line, whatever it is.
      throw (
        listenFailure(error, host, grpcPort, "--grpc-port") ??
        new CommandFailure(`cannot listen on --grpc-port ${grpcPort}: ${(error as Error).message}`)
      );
    }
    log.info("serving KEDA's external scaler protocol", {
      grpcPort: boundGrpcPort,
      tls: grpcTls ? (grpcTls.clientCa ? "mutual" : "server") : "off",
    });
    await autoscaler.start(address);
    const ingresses = (await knativeNetworkingServed(client, log))
      ? new KnativeIngressReconciler({
          client,
          namespace: values.namespace as string | undefined,
          models: autoscaler.informers.models,
          leaseNamespace,
          identity,
          leaseTiming: timing,
          domainInternal: `${activatorService}.${leaseNamespace}.svc.cluster.local`,
          activators: probeUrls
            ? async () => probeUrls
            : () => serviceActivators(client, leaseNamespace, activatorService),
          log: log.child({ part: "knative-ingress" }),
        })
      : undefined;
    await ingresses?.start();
    log.info("watching", { namespace: values.namespace ?? "all", knativeIngress: Boolean(ingresses) });
    const stops = watchStopSignals(log, { delayMs: shutdownDelay });
    await stops.first;
    // KEDA and the activators reach the autoscaler through its Service, whose endpoints lose this
    // pod a moment after SIGTERM: a KEDA stream ended now would come back (after KEDA's 2 s) to a
    // closed port still listed, and wait twice as long for each refusal. So it serves on for the
    // delay, Leases and all, with /readyz 503 (cli/activator.ts and cli/webhooks.ts do the same);
    // not when it never was ready, and so never among the endpoints.
    const wasReady = autoscaler.ready;
    autoscaler.leave();
    await stops.delay(wasReady ? shutdownDelay : 0);
    log.info("releasing Leases");
    const stopping = (async () => {
      await scaler.close();
      await ingresses?.stop();
      // The controllers stand down in stop's first, synchronous part (their activations end): the
      // last spans go to the collector while the last CloudEvents go to the sink, not after them.
      const standingDown = autoscaler.stop();
      const flushing = telemetry.shutdown();
      await standingDown;
      server.closeAllConnections();
      server.close();
      await client.close();
      await flushing;
    })();
    // A second signal stops waiting (for an API server that does not answer, a sink that hangs):
    // what is left gets the process's last second.
    await Promise.race([stopping, stops.second]);
    stops.dispose();
    log.info("stopped");
    return 0;
  },
};

/** The users `--allowed-callers` names, or Snooze's own two ServiceAccounts in its namespace. */
function allowedCallers(values: FlagValues, namespace: string): string[] {
  const flag = values["allowed-callers"];
  if (flag === undefined)
    return [
      serviceAccountUser(namespace, "snooze-activator"),
      serviceAccountUser(namespace, "snooze-autoscaler"),
    ];
  const users = String(flag)
    .split(",")
    .map((user) => user.trim())
    .filter(Boolean);
  if (users.length === 0) throw new UsageError("--allowed-callers must name at least one user");
  return users;
}

/**
 * The gRPC port's TLS from --grpc-tls-cert/-key (both or neither) and --grpc-client-ca, read once at
 * start: a renewed certificate is served after a restart (a rollout of the Deployment).
 */
async function grpcTlsOf(values: FlagValues): Promise<ScalerTls | undefined> {
  const cert = values["grpc-tls-cert"] as string | undefined;
  const key = values["grpc-tls-key"] as string | undefined;
  const clientCa = values["grpc-client-ca"] as string | undefined;
  if ((cert === undefined) !== (key === undefined))
    throw new UsageError("--grpc-tls-cert and --grpc-tls-key go together: give both, or neither");
  if (clientCa !== undefined && cert === undefined)
    throw new UsageError(
      "--grpc-client-ca needs --grpc-tls-cert and --grpc-tls-key (mutual TLS is TLS first)",
    );
  if (cert === undefined || key === undefined) return undefined;
  // Bounded and never blocking (found by an outside tester: a named pipe kept the start waiting for
  // good, deaf to SIGTERM, and /dev/zero was read on and on, never refused).
  const read = (flag: string, path: string) => {
    try {
      return readSmallFileSync(path, maxPemFileBytes);
    } catch (error) {
      throw new UsageError(`--${flag} ${path}: ${(error as Error).message}`);
    }
  };
  return {
    cert: read("grpc-tls-cert", cert),
    key: read("grpc-tls-key", key),
    ...(clientCa !== undefined ? { clientCa: read("grpc-client-ca", clientCa) } : {}),
  };
}
