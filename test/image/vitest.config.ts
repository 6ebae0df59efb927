import { defineConfig } from "vitest/config";

// The image suite: runs the OCI image that hack/build-image.sh built (cached outside the repo) by
// its entrypoint. Not part of `npm test`: a cold image build takes minutes (mmdebstrap) and needs
// root. `hack/test-image.sh` builds (or finds) the image and runs this suite.
export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/image/**/*.test.ts"],
    fileParallelism: false,
    testTimeout: 60_000,
    // A cold build (the Debian layer) takes about four minutes on two cores.
    hookTimeout: 900_000,
  },
});
