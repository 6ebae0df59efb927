#!/usr/bin/env bash
# Builds Knative Eventing's control plane (controller, webhook), its PingSource adapter (mtping)
# and the data plane of a Broker (the MT channel-based broker's controller `mtchannel_broker`, its
# `broker-ingress` and `broker-filter`; the in-memory channel's `imc-controller` and
# `imc-dispatcher`) from the Go module pinned in hack/knative-eventing/go.mod, and copies its
# manifests (config/core, config/brokers/mt-channel-broker and config/channels/in-memory-channel of
# the same module) into a cache folder the e2e harness reads:
#
#   ${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/knative-eventing/<eventing-version>/{controller,webhook,mtping,...,config/}
#
# It shares its dependencies' versions with Knative Serving's build (hack/knative): on a machine
# that built that first, most packages come from Go's build cache. A second run with the same pins,
# Go version and flags finds the stamp file and returns at once. The last line printed is the
# folder. Set SNOOZE_KNATIVE_EVENTING_FORCE=1 to rebuild anyway.
#
#   --print-folder   print the folder if the pinned version is built, else exit 1 (no Go needed)
#   --print-stamp    print the cache key of this checkout and Go, and exit
set -euo pipefail
mode="${1:-build}"

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=hack/lib/go-build.sh
source "$repo_root/hack/lib/go-build.sh"
module="$repo_root/hack/knative-eventing"
eventing=knative.dev/eventing

# The version is read from the wrapper go.mod, so the pin lives in exactly one place.
version="$(go_pinned_version "$module/go.mod" "$eventing")"
if [[ -z "$version" ]]; then
  echo "build-knative-eventing: cannot read the pinned version of $eventing from $module/go.mod" >&2
  exit 1
fi

out="${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/knative-eventing/$version"
# <binary>=<command under the module's cmd/>
commands=(
  controller=controller webhook=webhook mtping=mtping
  mtchannel_broker=mtchannel_broker broker-ingress=broker/ingress broker-filter=broker/filter
  imc-controller=in_memory/channel_controller imc-dispatcher=in_memory/channel_dispatcher
)
binaries=("${commands[@]%%=*}")

built() {
  for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || return 1; done
  [[ -f "$out/config/core/resources/pingsource.yaml" && -f "$out/config/core/deployments/pingsource-mt-adapter.yaml" \
    && -f "$out/config/brokers/mt-channel-broker/deployments/broker-ingress.yaml" \
    && -f "$out/config/channels/in-memory-channel/deployments/dispatcher.yaml" ]]
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
go_build_reuse build-knative-eventing "$mode" "$out" "$stamp" "${SNOOZE_KNATIVE_EVENTING_FORCE:-}" "$out" \
  "eventing $version" built

go_build_begin build-knative-eventing "$out" "Knative Eventing $version (${binaries[*]})"
work="$go_build_work"

packages=("${commands[@]/#*=/$eventing/cmd/}")
go_build_step build-knative-eventing "download modules" bash -c "cd '$module' && go mod download $eventing && go list -deps ${packages[*]} >/dev/null"
for c in "${commands[@]}"; do
  go_build_step build-knative-eventing "build ${c%%=*}" bash -c "cd '$module' && go build $go_flags -ldflags '$ld_flags' -o '$work/${c%%=*}' $eventing/cmd/${c#*=}"
done

# The manifests come from the same module as the binaries, so they always match them.
eventing_dir="$(cd "$module" && go list -m -f '{{.Dir}}' "$eventing")"
mkdir -p "$work/config/brokers" "$work/config/channels"
cp -R "$eventing_dir/config/core" "$work/config/core"
cp -R "$eventing_dir/config/brokers/mt-channel-broker" "$work/config/brokers/mt-channel-broker"
cp -R "$eventing_dir/config/channels/in-memory-channel" "$work/config/channels/in-memory-channel"
chmod -R u+w "$work/config"

go_build_done build-knative-eventing "$out" "$stamp" "$out" "binaries and manifests in $out"
