import { defineConfig } from "vitest/config";

// The e2e suite: a real kube-apiserver, etcd and kube-controller-manager (built by
// hack/build-kube-assets.sh, found via KUBEBUILDER_ASSETS or the build cache), or the cluster of the
// current kubeconfig with USE_EXISTING_CLUSTER=true. One control plane serves all files, which run
// one after another: the machine has two cores and the control plane needs one of them.
export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/e2e/**/*.test.ts"],
    globalSetup: ["test/e2e/global-setup.ts"],
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    teardownTimeout: 60_000,
  },
});
