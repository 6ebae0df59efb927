#!/usr/bin/env bash
# Builds Knative Serving's control plane (controller, webhook, autoscaler, queue-proxy) from the Go module
# pinned in hack/knative/go.mod, and copies its manifests (config/core of the same module: the
# CRDs, the config maps, the webhook configurations, with the networking and caching files that
# config/core links to) into a cache folder the e2e harness reads:
#
#   ${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/knative/<serving-version>/{controller,webhook,autoscaler,queue,config/}
#
# A second run with the same pins, Go version and flags finds the stamp file and returns at once.
# The last line printed is the folder. Set SNOOZE_KNATIVE_FORCE=1 to rebuild anyway.
#
#   --print-folder   print the folder if the pinned version is built, else exit 1 (no Go needed)
#   --print-stamp    print the cache key of this checkout and Go, and exit
set -euo pipefail
mode="${1:-build}"

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=hack/lib/go-build.sh
source "$repo_root/hack/lib/go-build.sh"
module="$repo_root/hack/knative"
serving=knative.dev/serving

# The version is read from the wrapper go.mod, so the pin lives in exactly one place.
version="$(go_pinned_version "$module/go.mod" "$serving")"
if [[ -z "$version" ]]; then
  echo "build-knative: cannot read the pinned version of $serving from $module/go.mod" >&2
  exit 1
fi

out="${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/knative/$version"
binaries=(controller webhook autoscaler queue)

built() {
  for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || return 1; done
  [[ -f "$out/config/core/300-resources/service.yaml" && -f "$out/config/core/300-resources/ingress.yaml" ]]
}

if [[ "$mode" == "--print-folder" ]]; then
  built || exit 1
  echo "$out"
  exit 0
fi

go_build_env
go_flags="-trimpath"
ld_flags="-s -w"
stamp="$(go_build_stamp "$module/go.mod" "$module/go.sum" -- "$go_flags $ld_flags ${binaries[*]}")"
go_build_reuse build-knative "$mode" "$out" "$stamp" "${SNOOZE_KNATIVE_FORCE:-}" "$out" "serving $version" built

go_build_begin build-knative "$out" "Knative Serving $version (controller, webhook, autoscaler, queue-proxy)"
work="$go_build_work"

go_build_step build-knative "download modules" bash -c "cd '$module' && go mod download $serving && go list -deps $serving/cmd/controller $serving/cmd/webhook $serving/cmd/autoscaler $serving/cmd/queue >/dev/null"
for b in "${binaries[@]}"; do
  go_build_step build-knative "build $b" bash -c "cd '$module' && go build $go_flags -ldflags '$ld_flags' -o '$work/$b' $serving/cmd/$b"
done

# The manifests come from the same modules as the binaries, so they always match them.
module_dir() { (cd "$module" && go list -m -f '{{.Dir}}' "$1"); }
serving_dir="$(module_dir "$serving")"
networking_dir="$(module_dir knative.dev/networking)"
caching_dir="$(module_dir knative.dev/caching)"
mkdir -p "$work/config"
cp -R "$serving_dir/config/core" "$work/config/core"
chmod -R u+w "$work/config"
# In Knative's repository these files of config/core are symlinks into its vendored networking and
# caching modules; a module zip drops symlinks, so they are copied from those modules (the versions
# the build list picked, the ones compiled into the binaries) to the places the symlinks have.
for f in certificate domain-claim ingress serverlessservice; do
  cp "$networking_dir/config/$f.yaml" "$work/config/core/300-resources/$f.yaml"
done
cp "$networking_dir/config/config-network.yaml" "$work/config/core/configmaps/network.yaml"
cp "$caching_dir/config/image.yaml" "$work/config/core/300-imagecache.yaml"
chmod -R u+w "$work/config"

go_build_done build-knative "$out" "$stamp" "$out" "binaries and manifests in $out"
