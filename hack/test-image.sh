#!/usr/bin/env bash
# Builds the OCI image (hack/build-image.sh; cached, so seconds when nothing changed) and runs the
# image suite (test/image/), which starts the image's entrypoint: in crun when it works here, else
# from the unpacked root file system with unshare (new mount and pid namespaces, the image's user).
# Needs root, like the build.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/build-image.sh | tail -n 3 >/dev/null
exec npx vitest run --config test/image/vitest.config.ts "$@"
