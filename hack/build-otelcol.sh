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

# Never let the go command fetch another toolchain; the module proxy serves modules only.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
go_version="$(go env GOVERSION)"
go_flags="-trimpath"
ld_flags="-s -w -X main.version=${version#v}"

# Everything that changes the binary goes into the cache key: the pins, the entry point, Go, the
# target and the flags. Editing a comment in this script does not cost a rebuild.
stamp="$(
  {
    cat "$module/go.mod" "$module/go.sum" "$module/main.go"
    echo "$go_version $(go env GOOS GOARCH) CGO_ENABLED=$CGO_ENABLED $go_flags $ld_flags"
  } | sha256sum | cut -d' ' -f1
)"
if [[ "$mode" == "--print-stamp" ]]; then
  echo "$stamp"
  exit 0
fi

if [[ "${SNOOZE_OTELCOL_FORCE:-}" != "1" && -x "$binary" && -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$stamp" ]]; then
  echo "build-otelcol: collector $version already built (cached, $go_version)" >&2
  echo "$binary"
  exit 0
fi

started=$SECONDS
echo "build-otelcol: building the OpenTelemetry Collector $version (core components) with $go_version into $out" >&2
mkdir -p "$cache_root"
work="$(mktemp -d "$cache_root/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

step() { # <label> <command...>: runs a build step and reports how long it took
  local label="$1" t0=$SECONDS
  shift
  echo "build-otelcol: $label ..." >&2
  "$@" >&2
  echo "build-otelcol: $label done in $((SECONDS - t0))s" >&2
}

step "download modules" bash -c "cd '$module' && go mod download"
# nice: a build on a small machine (CI runs tests on the same cores) should not starve them.
step "build" bash -c "cd '$module' && nice -n 19 go build $go_flags -ldflags '$ld_flags' -o '$work/otelcol' ."

# Smoke-test the result.
"$work/otelcol" --version >&2
"$work/otelcol" components >/dev/null
echo "$stamp" >"$work/.stamp"
chmod 755 "$work"

# Swap the finished folder in whole, so a reader never sees a half-built one.
rm -rf "$out.old"
[[ -d "$out" ]] && mv "$out" "$out.old"
mv "$work" "$out"
rm -rf "$out.old"
trap - EXIT

echo "build-otelcol: built in $((SECONDS - started))s" >&2
echo "$binary"
