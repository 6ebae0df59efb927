#!/usr/bin/env bash
# Builds hack/promlint (the Prometheus Go libraries' text parser and their linter, promlint) from
# the Go modules pinned in hack/promlint/go.mod, for the tests that check /metrics as a Prometheus
# server reads it, into a cache folder outside the repository:
#
#   ${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/promlint/<client_golang version>/promlint
#
# A second run with the same pins, Go version and flags finds the stamp file and returns at once.
# The last line printed is the binary's path, so `PROMLINT=$(hack/build-promlint.sh | tail -1)` works.
# Set SNOOZE_PROMLINT_FORCE=1 to rebuild anyway.
#
#   --print-path    print the binary's path if the pinned version is built, else exit 1 (no Go needed)
set -euo pipefail
mode="${1:-build}"

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=hack/lib/go-build.sh
source "$repo_root/hack/lib/go-build.sh"
module="$repo_root/hack/promlint"

version="$(go_pinned_version "$module/go.mod" github.com/prometheus/client_golang)"
if [[ -z "$version" ]]; then
  echo "build-promlint: cannot read the pinned client_golang version from $module/go.mod" >&2
  exit 1
fi

out="${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/promlint/$version"
binary="$out/promlint"

go_build_env
go_flags="-trimpath"
ld_flags="-s -w"
# The cache key: the pins, the program, Go, the target and the flags.
stamp="$(go_build_stamp "$module/go.mod" "$module/go.sum" "$module/main.go" -- "$go_flags $ld_flags")"

if [[ "$mode" == "--print-path" ]]; then
  go_build_cached "$out" "$stamp" "" && [[ -x "$binary" ]] || exit 1
  echo "$binary"
  exit 0
fi

go_build_reuse build-promlint "$mode" "$out" "$stamp" "${SNOOZE_PROMLINT_FORCE:-}" "$binary" "promlint $version" test -x "$binary"

go_build_begin build-promlint "$out" "promlint (client_golang $version)"
work="$go_build_work"

go_build_step build-promlint "download modules" bash -c "cd '$module' && go mod download"
go_build_step build-promlint "build" bash -c "cd '$module' && go build $go_flags -ldflags '$ld_flags' -o '$work/promlint' ."

# Smoke-test the result: a counter without _total is a problem it must name.
if ! printf '# HELP x_count A.\n# TYPE x_count counter\nx_count 1\n' | "$work/promlint" | grep -q '"problems":\[{'; then
  echo "build-promlint: the built linter found nothing wrong in a counter named without _total" >&2
  exit 1
fi
go_build_done build-promlint "$out" "$stamp" "$binary"
