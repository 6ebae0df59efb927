#!/usr/bin/env bash
# Builds a minimal OpenTelemetry Collector (core components only: the OTLP receiver, the batch
# processor, the OTLP/HTTP and debug exporters; see hack/otelcol/main.go) from the Go modules pinned
# in hack/otelcol/go.mod, for the tracing tests, into a cache folder outside the repository:
#
#   ${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/otelcol/<collector-version>/otelcol
#
# A second run with the same pins, Go version and flags finds the stamp file and returns at once.
# The last line printed is the binary's path, so `OTELCOL=$(hack/build-otelcol.sh | tail -1)` works.
# Set SNOOZE_OTELCOL_FORCE=1 to rebuild anyway.
#
#   --print-path    print the binary's path if the pinned version is built, else exit 1 (no Go needed)
#   --print-stamp   print the cache key of this checkout and Go, and exit
set -euo pipefail
mode="${1:-build}"

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=hack/lib/go-build.sh
source "$repo_root/hack/lib/go-build.sh"
module="$repo_root/hack/otelcol"

# The version is read from go.mod, so the pin lives in exactly one place.
version="$(awk '$1 == "go.opentelemetry.io/collector/otelcol" && $2 ~ /^v/ { print $2; exit }' "$module/go.mod")"
if [[ -z "$version" ]]; then
  echo "build-otelcol: cannot read the pinned collector version from $module/go.mod" >&2
  exit 1
fi

cache_root="${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/otelcol"
out="$cache_root/$version"
binary="$out/otelcol"

if [[ "$mode" == "--print-path" ]]; then
  [[ -x "$binary" ]] || exit 1
  echo "$binary"
  exit 0
fi

go_build_env
go_flags="-trimpath"
ld_flags="-s -w -X main.version=${version#v}"
# The cache key: the pins, the entry point, Go, the target and the flags.
stamp="$(go_build_stamp "$module/go.mod" "$module/go.sum" "$module/main.go" -- "$go_flags $ld_flags")"
go_build_reuse build-otelcol "$mode" "$out" "$stamp" "${SNOOZE_OTELCOL_FORCE:-}" "$binary" "collector $version" test -x "$binary"

go_build_begin build-otelcol "$out" "the OpenTelemetry Collector $version (core components)"
work="$go_build_work"

# At the lowest CPU priority: a build on a small machine (CI runs tests on the same cores) should
# not starve them.
go_build_step build-otelcol "download modules" bash -c "cd '$module' && go mod download"
go_build_step build-otelcol "build" bash -c "cd '$module' && go build $go_flags -ldflags '$ld_flags' -o '$work/otelcol' ."

# Smoke-test the result.
"$work/otelcol" --version >&2
"$work/otelcol" components >/dev/null
go_build_done build-otelcol "$out" "$stamp" "$binary"
