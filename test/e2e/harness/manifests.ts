import { execFile } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import {
  ApiextensionsV1Api,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  loadAllYaml,
  PatchStrategy,
} from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { repoRoot } from "./assets.ts";
import { waitFor } from "./wait.ts";

const run = promisify(execFile);

/** A manifest object and the file it came from, for error messages. */
export interface Manifest {
  source: string;
  object: KubernetesObject;
}

const clusterScoped = new Set([
  "Namespace",
  "CustomResourceDefinition",
  "ClusterRole",
  "ClusterRoleBinding",
  "ValidatingWebhookConfiguration",
  "MutatingWebhookConfiguration",
]);

/**
 * Objects in client-node's own model shape. KubernetesObjectApi serializes built-in kinds through
 * its typed models, which only know their JS names (`_default`, `xKubernetesValidations`): a plain
 * parsed object would silently lose `default`, `enum` and CEL rules of a CRD on the way out.
 */
export function parseManifests(text: string, source: string): Manifest[] {
  return (loadAllYaml(text) as (KubernetesObject | null)[])
    .filter((object): object is KubernetesObject => object !== null && typeof object === "object")
    .map((object) => ({ source, object }));
}

/**
 * Every object in every YAML file under `dir`. Left out: kustomization files, and files none of
 * whose documents has an apiVersion (Snooze's own settings files, like an example snooze.yaml).
 */
export async function manifestsUnder(dir: string): Promise<Manifest[]> {
  const out: Manifest[] = [];
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  const files = entries
    .filter((e) => e.isFile() && /\.ya?ml$/.test(e.name))
    .filter((e) => e.name !== "kustomization.yaml")
    .map((e) => join(e.parentPath, e.name))
    .sort();
  for (const file of files) {
    const text = await readFile(file, "utf8");
    const documents = parseAllDocuments(text).map((doc) => doc.toJS() as { apiVersion?: unknown } | null);
    if (!documents.some((doc) => doc?.apiVersion !== undefined)) continue;
    out.push(...parseManifests(text, relative(repoRoot, file)));
  }
  return out;
}

/** The kinds that give a component its identity and rights: namespace, CRDs, ServiceAccounts, RBAC. */
export const identityKinds = [
  "Namespace",
  "CustomResourceDefinition",
  "ServiceAccount",
  "ClusterRole",
  "ClusterRoleBinding",
  "Role",
  "RoleBinding",
] as const;

/** `kubectl kustomize <dir>`: the objects `kubectl apply -k <dir>` would send. */
export async function kustomize(kubectl: string, dir: string): Promise<Manifest[]> {
  const { stdout } = await run(kubectl, ["kustomize", dir], { maxBuffer: 16 * 1024 * 1024 });
  return parseManifests(stdout, `kustomize ${relative(repoRoot, dir)}`);
}

export const describeObject = (m: Manifest) =>
  `${m.source}: ${m.object.kind} ${m.object.metadata?.namespace ? `${m.object.metadata.namespace}/` : ""}${m.object.metadata?.name}`;

/**
 * Server-side apply of each object (with `dryRun`, the apiserver validates, defaults and admits it
 * but stores nothing). Namespaced objects without a namespace go to `namespace`. Resolves to the
 * failures, one line each, so a test can show all of them at once.
 */
export async function applyManifests(
  kc: KubeConfig,
  manifests: Manifest[],
  options: { dryRun: boolean; namespace?: string },
): Promise<string[]> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  const failures: string[] = [];
  for (const manifest of manifests) {
    let object = manifest.object;
    if (!clusterScoped.has(object.kind ?? "") && !object.metadata?.namespace && options.namespace) {
      object = { ...object, metadata: { ...object.metadata, namespace: options.namespace } };
    }
    try {
      await api.patch(
        object,
        undefined,
        options.dryRun ? "All" : undefined,
        "snooze-e2e",
        true,
        PatchStrategy.ServerSideApply,
      );
    } catch (error) {
      failures.push(`${describeObject({ ...manifest, object })}: ${errorText(error)}`);
    }
  }
  return failures;
}

/** Waits until every named CRD is Established (its API is served). */
export async function waitForCrds(kc: KubeConfig, names: string[]): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  for (const name of names) {
    await waitFor(
      async () => {
        const crd = await api.readCustomResourceDefinition({ name });
        return crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")
          ? true
          : undefined;
      },
      { what: `CRD ${name} Established`, timeoutMs: 30_000, intervalMs: 100 },
    );
  }
}

/** The apiserver's message from a client-node error (its Status body), else the error text. */
export function errorText(error: unknown): string {
  const body = (error as { body?: unknown }).body;
  if (typeof body === "string") {
    try {
      const parsed = JSON.parse(body) as { message?: string };
      if (parsed.message) return parsed.message;
    } catch {
      return body;
    }
  }
  if (body && typeof body === "object" && "message" in body)
    return String((body as { message: unknown }).message);
  return error instanceof Error ? error.message : String(error);
}
