import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { requireKeda } from "./components/keda.ts";
import { findKnative } from "./components/knative.ts";
import { findKnativeEventing, knativeEventingMissing } from "./components/knative-eventing.ts";
import { repoRoot } from "./harness/assets.ts";
import {
  applyManifests,
  describeObject,
  kustomize,
  type Manifest,
  manifestsUnder,
  parseManifests,
  waitForCrds,
} from "./harness/manifests.ts";
import { createTestNamespace } from "./harness/namespace.ts";
import { suiteCluster } from "./harness/suite.ts";

const run = promisify(execFile);
const cluster = suiteCluster();
const config = join(repoRoot, "config");
let samples: Awaited<ReturnType<typeof createTestNamespace>>;
let all: Manifest[];

beforeAll(async () => {
  all = await manifestsUnder(config);
  // Dry-runs of namespaced objects need their namespace and the CRDs of their kinds for real.
  // Knative Serving's CRDs are its own when hack/build-knative.sh built it (another file may have
  // installed them already: a stand-in must not replace them); else a minimal stand-in of its Service
  // CRD. Knative Eventing's (PingSource, Trigger) are its own, from hack/build-knative-eventing.sh.
  // KEDA's CRDs are its own, from the module hack/build-keda.sh builds.
  const knative = findKnative();
  const eventing = findKnativeEventing();
  if (!eventing) throw new Error(knativeEventingMissing());
  const keda = requireKeda();
  const prerequisites = [
    ...all.filter((m) => m.object.kind === "CustomResourceDefinition" || m.object.kind === "Namespace"),
    ...(await manifestsUnder(join(repoRoot, "test/e2e/fixtures"))).filter(
      (m) => !knative || m.object.metadata?.name !== "services.serving.knative.dev",
    ),
    ...(knative ? await manifestsUnder(join(knative, "config/core/300-resources")) : []),
    ...(await manifestsUnder(join(eventing, "config/core/resources"))),
    ...(await kustomize(cluster.info.kubectl, join(keda, "config/crd"))),
  ];
  expect(await applyManifests(cluster.admin, prerequisites, { dryRun: false })).toEqual([]);
  await waitForCrds(cluster.admin, [
    "models.snooze.dev",
    "slots.snooze.dev",
    "services.serving.knative.dev",
    "pingsources.sources.knative.dev",
    "triggers.eventing.knative.dev",
    "scaledobjects.keda.sh",
    "triggerauthentications.keda.sh",
  ]);
  samples = await createTestNamespace(cluster.admin, "snooze-e2e-samples");
});

afterAll(async () => {
  await samples?.remove();
});

describe("the manifests in config/", () => {
  test("every object in every file passes a server-side dry-run", async () => {
    expect(all.length).toBeGreaterThan(20);
    const failures = await applyManifests(cluster.admin, all, { dryRun: true, namespace: samples.name });
    expect(failures).toEqual([]);
  });

  test("the kustomize base renders one of each piece per component and passes a server-side dry-run", async () => {
    const rendered = await kustomize(cluster.info.kubectl, join(config, "default"));
    const count = (kind: string) => rendered.filter((m) => m.object.kind === kind).length;
    expect({
      Namespace: count("Namespace"),
      CustomResourceDefinition: count("CustomResourceDefinition"),
      ServiceAccount: count("ServiceAccount"),
      Deployment: count("Deployment"),
      Service: count("Service"),
      PodDisruptionBudget: count("PodDisruptionBudget"),
    }).toEqual({
      Namespace: 2,
      CustomResourceDefinition: 2,
      ServiceAccount: 3,
      Deployment: 3,
      Service: 3,
      PodDisruptionBudget: 3,
    });
    // Everything in snooze-system but the webhooks' rights on their admission claims, which live in
    // a namespace of their own, away from the autoscaler's Leases.
    for (const m of rendered.filter((r) => r.object.metadata?.namespace)) {
      const claims = m.object.metadata?.name === "snooze-webhooks-claims";
      expect(m.object.metadata?.namespace, describeObject(m)).toBe(
        claims ? "snooze-slot-claims" : "snooze-system",
      );
    }
    expect(
      rendered
        .filter((m) => m.object.metadata?.namespace === "snooze-slot-claims")
        .map((m) => m.object.kind)
        .sort(),
    ).toEqual(["Role", "RoleBinding"]);
    expect(await applyManifests(cluster.admin, rendered, { dryRun: true })).toEqual([]);
  });

  test("config/samples/grpc-tls: the base with the grpc-tls component gives the autoscaler its TLS flags from a Secret, and passes a server-side dry-run", async () => {
    const rendered = await kustomize(cluster.info.kubectl, join(config, "samples/grpc-tls"));
    const autoscaler = rendered.find(
      (m) => m.object.kind === "Deployment" && m.object.metadata?.name === "snooze-autoscaler",
    )!.object as any;
    const pod = autoscaler.spec.template.spec;
    expect(pod.containers[0].args).toEqual(
      expect.arrayContaining([
        "--grpc-tls-cert=/tls/tls.crt",
        "--grpc-tls-key=/tls/tls.key",
        "--grpc-client-ca=/tls/ca.crt",
      ]),
    );
    expect(pod.containers[0].volumeMounts).toEqual([{ name: "grpc-tls", mountPath: "/tls", readOnly: true }]);
    expect(pod.volumes).toEqual([{ name: "grpc-tls", secret: { secretName: "snooze-autoscaler-grpc-tls" } }]);
    expect(rendered.filter((m) => m.object.kind === "Deployment")).toHaveLength(3);
    expect(await applyManifests(cluster.admin, rendered, { dryRun: true })).toEqual([]);
  });

  test("`kubectl apply -k config/default --dry-run=server` succeeds without Pod Security warnings", async () => {
    const { stdout, stderr } = await run(
      cluster.info.kubectl,
      [
        "apply",
        "-k",
        join(config, "default"),
        "--server-side",
        "--dry-run=server",
        "--field-manager=snooze-e2e",
      ],
      { env: { ...process.env, KUBECONFIG: cluster.info.kubeconfigPath } },
    );
    expect(stdout).toMatch(/deployment\.apps\/snooze-activator serverside-applied \(server dry run\)/);
    // snooze-system enforces the restricted Pod Security Standard: our pods must meet it.
    expect(stderr).not.toMatch(/violate PodSecurity/);
  });

  test("a Deployment that breaks the restricted Pod Security Standard is refused in snooze-system", async () => {
    // Proves the check above can fail: the namespace label is enforced by the apiserver.
    const [bad] = parseManifests(
      `apiVersion: v1
kind: Pod
metadata: {name: privileged, namespace: snooze-system}
spec:
  containers: [{name: c, image: x, securityContext: {privileged: true}}]
`,
      "inline",
    );
    const failures = await applyManifests(cluster.admin, [bad!], { dryRun: true });
    expect(failures.join("\n")).toMatch(/violates PodSecurity "restricted/);
  });
});
