import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A kubeconfig, in a temporary folder of its own, naming a plain-HTTP API server on loopback with a
 * token user: for the Kubernetes commands run against a stand-in API server. Remove `dir` after.
 */
export function tokenKubeconfig(port: number, prefix: string): { dir: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const path = join(dir, "kubeconfig");
  writeFileSync(
    path,
    `apiVersion: v1
kind: Config
clusters: [{name: stand-in, cluster: {server: "http://127.0.0.1:${port}"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: stand-in, user: u, namespace: default}}]
current-context: c
`,
  );
  return { dir, path };
}
