#!/usr/bin/env bash
# Builds KEDA's operator (keda) and metrics API server (keda-adapter) from the Go module pinned in
# hack/keda/go.mod, and copies KEDA's manifests (config/ of the same module: the CRDs with their
# kustomize patches, RBAC, the APIService) into a cache folder outside the repository that the e2e
# harness reads:
#
#   ${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/keda/<keda-version>/{keda,keda-adapter,config/}
#
# KEDA's operator links every scaler's cloud SDK, so a cold build takes many minutes (13–19 min on
# 2 cores was measured for v2.21.0's operator); it runs at the lowest CPU priority so it can overlap
# other work. A second run with the same pins, Go version and flags finds the stamp file and returns
# in seconds. The last line printed is the folder. Set SNOOZE_KEDA_FORCE=1 to rebuild anyway.
#
#   --print-folder   print the folder if the binaries of the pinned version are there, else exit 1;
#                    never builds and needs no Go (the e2e suite uses it to find the binaries)
#   --print-stamp    print the cache key of this checkout and Go, and exit
set -euo pipefail
mode="${1:-build}"

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=hack/lib/go-build.sh
source "$repo_root/hack/lib/go-build.sh"
module="$repo_root/hack/keda"
keda_module=github.com/kedacore/keda/v2

# The version is read from the wrapper go.mod, so the pin lives in exactly one place.
keda_version="$(go_pinned_version "$module/go.mod" "$keda_module")"
if [[ -z "$keda_version" ]]; then
  echo "build-keda: cannot read the pinned version of $keda_module from $module/go.mod" >&2
  exit 1
fi

cache_root="${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/keda"
out="$cache_root/$keda_version"
binaries=(keda keda-adapter)

manifests_there() { [[ -f "$out/config/crd/bases/keda.sh_scaledobjects.yaml" ]]; }

if [[ "$mode" == "--print-folder" ]]; then
  for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || exit 1; done
  manifests_there || exit 1
  echo "$out"
  exit 0
fi

go_build_env
go_version="$(go env GOVERSION)"

go_flags="-trimpath"
# Stamp the version the way KEDA's Makefile does (GO_LDFLAGS); the operator logs it at start-up.
version_flags="-X $keda_module/version.Version=${keda_version#v} -X $keda_module/version.GitCommit="

# Everything that changes the binaries goes into the cache key: the pins (go.mod, go.sum), Go and
# the target, and the build flags. Editing a comment in this script does not cost a rebuild.
# Not go_build_stamp: that one hashes a final newline this key never had, and a changed key would
# rebuild KEDA (tens of minutes) on every machine that has it cached.
stamp_input="$(
  cat "$module/go.mod" "$module/go.sum"
  echo "$go_version $(go env GOOS GOARCH) CGO_ENABLED=$CGO_ENABLED $go_flags -s -w $version_flags"
)"
stamp="$(printf '%s' "$stamp_input" | sha256sum | cut -d' ' -f1)"
if [[ "$mode" == "--print-stamp" ]]; then
  echo "$stamp"
  exit 0
fi

have_all() {
  [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$stamp" ]] || return 1
  for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || return 1; done
}

# KEDA's manifests come from the same module as the binaries, so they always match them.
copy_manifests() { # <folder>
  local module_dir
  module_dir="$(cd "$module" && go mod download -json "$keda_module@$keda_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -f "$module_dir/config/crd/bases/keda.sh_scaledobjects.yaml" ]] || {
    echo "build-keda: no config/crd/bases in $module_dir" >&2
    return 1
  }
  rm -rf "$1/config"
  cp -R "$module_dir/config" "$1/config"
  chmod -R u+w "$1/config"
}

if [[ "${SNOOZE_KEDA_FORCE:-}" != "1" ]] && have_all; then
  if ! manifests_there; then
    echo "build-keda: copying KEDA's manifests from the module" >&2
    copy_manifests "$out"
  fi
  echo "build-keda: keda $keda_version already built (cached, ${go_version})" >&2
  echo "$out"
  exit 0
fi

go_build_begin build-keda "$out" "keda $keda_version (operator, metrics adapter)"
echo "build-keda: the operator compiles every scaler's cloud SDK; this takes many minutes the first time" >&2
work="$go_build_work"

go_build_step build-keda "download modules" bash -c "cd '$module' && go mod download $keda_module && go list -deps $keda_module/cmd/operator $keda_module/cmd/adapter >/dev/null"
go_build_step build-keda "build keda-adapter $keda_version" bash -c "cd '$module' && \
  go build $go_flags -ldflags '-s -w $version_flags' -o '$work/keda-adapter' $keda_module/cmd/adapter"
go_build_step build-keda "build keda (operator) $keda_version" bash -c "cd '$module' && \
  go build $go_flags -ldflags '-s -w $version_flags' -o '$work/keda' $keda_module/cmd/operator"

copy_manifests "$work"

# Smoke-test the results: each binary must start and print its flags (--help exits 0, or 2 where
# the flag package treats help as a parse error).
for b in "${binaries[@]}"; do
  "$work/$b" --help >/dev/null 2>&1 || [[ $? -eq 2 ]] || { echo "build-keda: $b does not run" >&2; exit 1; }
done
go_build_done build-keda "$out" "$stamp" "$out" "binaries and manifests in $out"
