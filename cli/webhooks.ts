import { type FlagValues, UsageError } from "../lib/cli-flags.ts";
import { createLogger } from "../lib/log.ts";
import { redactUrl } from "../lib/redact-url.ts";
import { byteSize } from "../lib/settings/index.ts";
import { serviceAccountNamespace } from "../webhooks/slot-residency.ts";
import { startWebhooks } from "../webhooks/webhooks.ts";
import type { Command } from "./command.ts";
import { durationValue, hostValue, listenFailure, portValue } from "./flags.ts";
import { kubeClientFrom } from "./kube-flags.ts";
import { watchStopSignals } from "./signals.ts";

const durationFlag = (values: FlagValues, name: string): number =>
  durationValue(values, name, { positive: true });
// A certificate's lifetime is written into it, not waited for by a timer (the rotation's timer waits
// at most --cert-resync), so it may pass a timer's limit: the CA's default is a year.
const lifetimeFlag = (values: FlagValues, name: string): number =>
  durationValue(values, name, { positive: true, timer: false });

/** The DNS names a Service is reached by from the apiserver. */
export function serviceHosts(service: string, namespace: string): string[] {
  return [
    service,
    `${service}.${namespace}`,
    `${service}.${namespace}.svc`,
    `${service}.${namespace}.svc.cluster.local`,
  ];
}

export const webhooksCommand: Command = {
  name: "webhooks",
  flags: {
    host: { type: "string", default: "127.0.0.1", description: "address to listen on" },
    port: { type: "string", short: "p", default: "8443", description: "port to listen on" },
    "reuse-port": {
      type: "boolean",
      description: "share the port with other processes (SO_REUSEPORT), like replicas behind a Service",
    },
    kubeconfig: {
      type: "string",
      description: "kubeconfig file (development); default: $KUBECONFIG, else the pod's ServiceAccount",
      placeholder: "file",
    },
    certs: {
      type: "string",
      default: "self",
      description:
        "self: manage a CA and serving certificate in a Secret; files: read --tls-cert/--tls-key (cert-manager)",
      placeholder: "self|files",
    },
    namespace: {
      type: "string",
      default: process.env.POD_NAMESPACE ?? "snooze-system",
      description: "namespace of the certificate Secret and of the Service",
    },
    "claim-namespace": {
      type: "string",
      default: "snooze-slot-claims",
      description:
        "namespace of the slots' admission claims (Leases); keep it apart from the autoscaler's Leases",
      placeholder: "namespace",
    },
    service: {
      type: "string",
      default: "snooze-webhooks",
      description: "Service the apiserver calls (certificate DNS names)",
    },
    "cert-hosts": {
      type: "string",
      description: "more certificate names or IPs, comma-separated (e.g. 127.0.0.1 for a url webhook)",
      placeholder: "hosts",
    },
    secret: {
      type: "string",
      default: "snooze-webhook-certs",
      description: "Secret that holds the CA and the serving certificate",
    },
    "validating-configuration": {
      type: "string",
      default: "snooze-webhooks",
      description: "ValidatingWebhookConfiguration whose CA bundle Snooze writes (empty: none)",
      placeholder: "name",
    },
    "mutating-configuration": {
      type: "string",
      default: "snooze-webhooks",
      description: "MutatingWebhookConfiguration whose CA bundle Snooze writes (empty: none)",
      placeholder: "name",
    },
    "ca-validity": {
      type: "string",
      default: "8760h",
      description: "lifetime of a CA",
      placeholder: "duration",
    },
    "cert-validity": {
      type: "string",
      default: "720h",
      description: "lifetime of a serving certificate",
      placeholder: "duration",
    },
    "cert-resync": {
      type: "string",
      default: "1m",
      description: "how often the Secret and CA bundles are checked between rotations",
      placeholder: "duration",
    },
    "tls-cert": {
      type: "string",
      description: "serving certificate file (--certs files)",
      placeholder: "file",
    },
    "tls-key": { type: "string", description: "serving key file (--certs files)", placeholder: "file" },
    "cert-reload": {
      type: "string",
      default: "10s",
      description: "how often certificate files are read again (--certs files)",
      placeholder: "duration",
    },
    "autoscaler-service-account": {
      type: "string",
      default: "system:serviceaccount:snooze-system:snooze-autoscaler",
      description: "user name of the autoscaler, the one writer that may swap slot members",
      placeholder: "user",
    },
    "lease-namespace": {
      type: "string",
      description: "namespace of the autoscaler's slot Leases (default: the autoscaler ServiceAccount's)",
      placeholder: "namespace",
    },
    "max-body-size": {
      type: "string",
      default: "6Mi",
      description: "largest review accepted (400 past it)",
      placeholder: "size",
    },
    "decision-timeout": {
      type: "string",
      default: "8s",
      description: "a decision taking longer is a denial (kept below the apiserver's timeout)",
      placeholder: "duration",
    },
    "shutdown-grace": {
      type: "string",
      default: "10s",
      description: "how long reviews in flight may finish after SIGTERM or SIGINT",
      placeholder: "duration",
    },
    "shutdown-delay": {
      type: "string",
      default: "5s",
      description:
        "after SIGTERM, how long reviews are still taken, /readyz answering 503, before the port closes: time for Kubernetes to take the pod out of its Service's endpoints (a second signal ends it)",
      placeholder: "duration",
    },
  },
  async run(values) {
    const port = portValue(values);
    const host = hostValue(values);
    const maxBody = byteSize.safeParse(String(values["max-body-size"]));
    if (!maxBody.success || maxBody.data < 1)
      throw new UsageError(
        `--max-body-size must be a size of at least 1 byte, like 6Mi, not "${values["max-body-size"]}"`,
      );
    const mode = String(values.certs);
    if (mode !== "self" && mode !== "files")
      throw new UsageError(`--certs must be self or files, not "${mode}"`);
    if (mode === "files" && (!values["tls-cert"] || !values["tls-key"]))
      throw new UsageError("--certs files needs --tls-cert and --tls-key");
    const namespace = String(values.namespace);
    const extraHosts = String(values["cert-hosts"] ?? "")
      .split(",")
      .map((h) => h.trim())
      .filter(Boolean);
    const caValidityMs = lifetimeFlag(values, "ca-validity");
    const certValidityMs = lifetimeFlag(values, "cert-validity");
    if (certValidityMs >= caValidityMs)
      throw new UsageError("--cert-validity must be shorter than --ca-validity");
    // Read before connecting, so that a mistyped one is said at once.
    const resyncMs = durationFlag(values, "cert-resync");
    const reloadMs = durationFlag(values, "cert-reload");
    const decisionTimeoutMs = durationFlag(values, "decision-timeout");
    const grace = durationFlag(values, "shutdown-grace");
    // 0 is none: the port closes at SIGTERM (replicas sharing one port through --reuse-port).
    const shutdownDelay = durationValue(values, "shutdown-delay");
    const autoscalerUser = String(values["autoscaler-service-account"]);
    const leaseNamespace = String(
      values["lease-namespace"] ?? serviceAccountNamespace(autoscalerUser) ?? "snooze-system",
    );
    const log = createLogger({ component: "webhooks" });
    const { client, source } = await kubeClientFrom(values, "webhooks");
    log.info("starting", { server: redactUrl(client.server), credentials: source });
    const webhooks = await startWebhooks({
      host,
      port,
      reusePort: values["reuse-port"] === true,
      client,
      certificates:
        mode === "self"
          ? {
              mode,
              namespace,
              secretName: String(values.secret),
              validatingConfiguration: String(values["validating-configuration"]),
              mutatingConfiguration: String(values["mutating-configuration"]),
              hosts: [...serviceHosts(String(values.service), namespace), ...extraHosts],
              caValidityMs,
              certValidityMs,
              resyncMs,
            }
          : {
              mode,
              certPath: String(values["tls-cert"]),
              keyPath: String(values["tls-key"]),
              reloadMs,
            },
      autoscaler: { username: autoscalerUser, leaseNamespace },
      claimNamespace: String(values["claim-namespace"]),
      maxBodyBytes: maxBody.data,
      decisionTimeoutMs,
      log,
    }).catch((error: unknown) => {
      throw listenFailure(error, host, port) ?? error;
    });
    let wasReady = false;
    // Not ready at all (the caches never filled) is told as it was: here only whether it became so.
    webhooks.ready.then(
      () => (wasReady = true),
      () => {},
    );
    const stops = watchStopSignals(log, { graceMs: grace, delayMs: shutdownDelay });
    await stops.first;
    // The apiserver reaches the webhooks through their Service, whose endpoints lose this pod a
    // moment after SIGTERM: a review sent meanwhile to a closed port would fail the write it
    // guards (failurePolicy Fail). So reviews are still taken for the delay (cli/activator.ts too),
    // unless it was never ready, and so never among the endpoints.
    webhooks.server.leave();
    await stops.delay(wasReady ? shutdownDelay : 0);
    // A second signal stops waiting for the grace: what is left gets the process's last second.
    await Promise.race([webhooks.close(grace), stops.second]);
    stops.dispose();
    log.info("stopped");
    return 0;
  },
};
