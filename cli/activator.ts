import { hostname } from "node:os";
import { Activator } from "../activator/activator.ts";
import { KubeControlPlane } from "../activator/kube-control-plane.ts";
import { defaultEventsAudience, KubeEventSenders } from "../activator/kube-event-senders.ts";
import { KubeIngresses } from "../activator/kube-ingresses.ts";
import { listenActivator } from "../activator/listen.ts";
import { createActivatorServer } from "../activator/server.ts";
import { knativeNetworkingServed } from "../lib/knative/networking-served.ts";
import { createLogger } from "../lib/log.ts";
import { Registry } from "../lib/prometheus.ts";
import { redactUrl } from "../lib/redact-url.ts";
import { startTelemetry } from "../lib/telemetry.ts";
import { undici } from "../lib/undici.ts";
import { adminTokenFlags, serverAdminToken } from "./admin-token.ts";
import type { Command } from "./command.ts";
import { allowedOriginsValue, corsFlags } from "./cors-flags.ts";
import { durationValue, hostValue, listenFailure, listenFlags, portValue } from "./flags.ts";
import { httpUrlValue, identityValue, kubeClientFrom, kubeFlags } from "./kube-flags.ts";
import { watchStopSignals } from "./signals.ts";

export const activatorCommand: Command = {
  name: "activator",
  flags: {
    ...listenFlags(8080),
    ...adminTokenFlags,
    ...corsFlags,
    ...kubeFlags,
    "autoscaler-url": {
      type: "string",
      description:
        "where demand and stats go (default: $SNOOZE_AUTOSCALER_URL, else http://snooze-autoscaler.snooze-system.svc:8090)",
      placeholder: "url",
    },
    identity: {
      type: "string",
      description:
        "this activator's name in demand and stats (default: $POD_NAME, else the host name and pid)",
      placeholder: "name",
    },
    "events-audience": {
      type: "string",
      default: defaultEventsAudience,
      description:
        "besides the admin token, POST /snooze/v1/events takes a Kubernetes token issued for this audience (a Knative Trigger's OIDC token) whose user RBAC lets do the event's verb on its Model",
      placeholder: "audience",
    },
    "shutdown-grace": {
      type: "string",
      default: "30s",
      description: "how long in-flight requests may finish after SIGTERM or SIGINT",
      placeholder: "duration",
    },
    "shutdown-delay": {
      type: "string",
      default: "5s",
      description:
        "after SIGTERM, how long requests are still taken, /readyz answering 503, before the port closes: time for Kubernetes to take the pod out of its Service's endpoints, and for proxies and load balancers to follow (a second signal ends it)",
      placeholder: "duration",
    },
    "stats-interval": {
      type: "string",
      default: "1s",
      description: "how often load is reported to the autoscaler",
      placeholder: "duration",
    },
  },
  async run(values) {
    // undici's dispatchers now, not at the first ready pod a route forwards to, where loading them
    // (some milliseconds) would hold the first activation's requests that much longer (lib/undici.ts).
    undici();
    const port = portValue(values, "port", { fetched: true });
    const host = hostValue(values);
    const grace = durationValue(values, "shutdown-grace");
    const shutdownDelay = durationValue(values, "shutdown-delay");
    const adminToken = serverAdminToken(values, host);
    const allowedOrigins = allowedOriginsValue(values);
    const statsIntervalMs = durationValue(values, "stats-interval", { positive: true });
    const identity = identityValue(values, () => `${hostname()}-${process.pid}`);
    const autoscalerUrl = httpUrlValue(
      String(
        values["autoscaler-url"] ??
          // Set but empty is unset, as $SNOOZE_URL is for the client commands.
          (process.env.SNOOZE_AUTOSCALER_URL || "http://snooze-autoscaler.snooze-system.svc:8090"),
      ),
      values["autoscaler-url"] === undefined ? "$SNOOZE_AUTOSCALER_URL" : "--autoscaler-url",
    );
    const log = createLogger({ component: "activator", identity });
    const { client, source } = await kubeClientFrom(values, "activator");
    const telemetry = await startTelemetry("snooze-activator", log);
    const registry = new Registry();

    let activator: Activator | undefined;
    const controlPlane = new KubeControlPlane({
      client,
      autoscalerUrl,
      identity,
      namespace: values.namespace as string | undefined,
      log,
      onModel: (config) => {
        log.info("model", { model: config.id, aliases: config.aliases });
        activator?.upsertModel(config);
      },
      onModelRemoved: (id) => {
        log.info("model removed", { model: id });
        activator?.removeModel(id);
      },
    });
    // Snooze's Knative ingress class: routes by Host where Knative Serving's networking API is served.
    const ingresses = (await knativeNetworkingServed(client, log))
      ? new KubeIngresses({
          client,
          namespace: values.namespace as string | undefined,
          log,
          modelOf: (namespace, name) => controlPlane.modelIdOf(namespace, name),
        })
      : undefined;
    activator = new Activator({
      config: {
        models: new Map(),
        names: new Map(),
        slots: new Map(),
        hostMemoryBudget: Number.POSITIVE_INFINITY,
        maxBodySize: 32 * 2 ** 20,
      },
      controlPlane,
      registry,
      log,
      statsIntervalMs,
      hosts: ingresses,
    });
    log.info("starting", {
      server: redactUrl(client.server),
      credentials: source,
      autoscaler: autoscalerUrl,
    });
    // Every Model and pod is known before the first request: a restarted activator routes at once.
    await controlPlane.start();
    await ingresses?.start();
    const server = createActivatorServer({
      activator,
      registry,
      adminToken,
      allowedOrigins,
      log,
      eventSenders: new KubeEventSenders({
        client,
        audience: String(values["events-audience"]),
        modelObjectOf: (id) => controlPlane.modelObjectOf(id),
      }),
      admin: {
        // The caller's trace (an incoming event's) goes along, so the activation joins it.
        wake: async (model, options) =>
          void (await controlPlane.admin(model, "wake", undefined, options?.caller)),
        // The event's `for` (or a listing's hint) goes to the Model's leader, within its prewarmBudget.
        prewarm: async (model, forMs, options) => ({
          keptMs:
            (await controlPlane.admin(model, "prewarm", { forMs, hint: options?.hint }, options?.caller))
              .keptMs ?? 0,
        }),
        sleep: async (model) => void (await controlPlane.admin(model, "sleep")),
        stop: async (model) => void (await controlPlane.admin(model, "stop")),
        details: (model) => controlPlane.details(model),
        slots: () => controlPlane.slots(),
      },
    });
    let listening: Awaited<ReturnType<typeof listenActivator>>;
    try {
      listening = await listenActivator(server, { port, host });
    } catch (error) {
      throw listenFailure(error, host, port) ?? error;
    }
    log.info("listening", { address: listening.address, models: [...activator.routes.keys()] });
    const stops = watchStopSignals(log, { graceMs: grace, delayMs: shutdownDelay });
    await stops.first;
    // Kubernetes takes a terminating pod out of its Service's endpoints a moment after SIGTERM, and
    // kube-proxy, ingresses and load balancers follow later still: what they send meanwhile is
    // served, not refused at a closed port (as kube-apiserver's --shutdown-delay-duration does).
    activator.leave();
    await stops.delay(shutdownDelay);
    listening.close();
    // A second signal ends what is still in flight at once, each client told why.
    void stops.second.then(() => activator.endInFlight());
    await activator.shutdown(grace);
    server.closeAllConnections();
    await controlPlane.stop();
    await ingresses?.stop();
    await client.close();
    await telemetry.shutdown();
    stops.dispose();
    log.info("stopped");
    return 0;
  },
};
