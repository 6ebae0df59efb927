import { defineConfig } from "vitest/config";

// Unit and integration tests: fast, no Go toolchain, no Kubernetes binaries.
// The e2e suite against a real kube-apiserver has its own config in test/e2e/, and the suite that
// runs the OCI image (hack/test-image.sh) its own in test/image/.
export default defineConfig({
  test: {
    include: ["**/*.test.ts"],
    exclude: ["node_modules/**", "test/e2e/**", "test/image/**", "hack/.cache/**"],
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
});
