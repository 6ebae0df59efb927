import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";

/** The binaries the harness runs, under the names controller-runtime's envtest uses. */
export const assetNames = ["etcd", "kube-apiserver", "kube-controller-manager", "kubectl"] as const;
export type AssetName = (typeof assetNames)[number];

export const repoRoot = resolve(import.meta.dirname, "../../..");

/**
 * The folder holding the control-plane binaries: KUBEBUILDER_ASSETS when set, otherwise the folder
 * hack/build-kube-assets.sh builds into (asked from the script itself, so the two never disagree).
 * The script only answers when the binaries are already there; it never builds from here.
 */
export function findAssets(): string {
  const fromEnv = process.env.KUBEBUILDER_ASSETS;
  if (fromEnv) return checked(fromEnv, "KUBEBUILDER_ASSETS");
  const cacheRoot = join(process.env.SNOOZE_CACHE_DIR ?? join(homedir(), ".cache", "snooze"), "kube-assets");
  let folder: string | undefined;
  try {
    folder = execFileSync("bash", [join(repoRoot, "hack/build-kube-assets.sh"), "--print-folder"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    }).trim();
  } catch {
    folder = undefined;
  }
  if (!folder) {
    throw new Error(
      `no Kubernetes binaries: run hack/build-kube-assets.sh (builds into ${cacheRoot}/<version>), ` +
        "set KUBEBUILDER_ASSETS, or set USE_EXISTING_CLUSTER=true",
    );
  }
  return checked(folder, "hack/build-kube-assets.sh");
}

function checked(folder: string, source: string): string {
  const missing = assetNames.filter((name) => !existsSync(join(folder, name)));
  if (missing.length > 0) throw new Error(`${source} folder ${folder} lacks ${missing.join(", ")}`);
  return folder;
}

/** A Go component a hack/build-*.sh script builds into the cache (KEDA, Knative Serving). */
export interface BuiltComponent {
  /** What the "not built" message calls it, e.g. "KEDA". */
  name: string;
  /** The script under hack/ that builds it and answers `--print-folder`. */
  script: string;
  /** Its folder under the cache, e.g. "keda". */
  cacheFolder: string;
  /** The variable that points the suite at another folder, e.g. SNOOZE_KEDA_DIR. */
  envVar: string;
  /** A file the folder must hold. */
  marker: string;
}

/**
 * The folder the component's script built, or undefined when it is not built: the variable's folder
 * when set, else the script's own answer (it only answers when the build is there; it never builds).
 */
export function findBuilt(component: BuiltComponent): string | undefined {
  const fromEnv = process.env[component.envVar];
  if (fromEnv) return existsSync(join(fromEnv, component.marker)) ? fromEnv : undefined;
  try {
    return (
      execFileSync("bash", [join(repoRoot, "hack", component.script), "--print-folder"], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      }).trim() || undefined
    );
  } catch {
    return undefined;
  }
}

/** What a test says when the component is not built: how to build it and where it goes. */
export const notBuilt = (component: BuiltComponent): string =>
  `${component.name} is not built: run hack/${component.script} (builds into ` +
  `${join(process.env.SNOOZE_CACHE_DIR ?? join(homedir(), ".cache", "snooze"), component.cacheFolder)}/<version>) ` +
  `or set ${component.envVar}`;
