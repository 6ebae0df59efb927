#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries the e2e harness runs (kube-apiserver,
# kube-controller-manager, kubectl, etcd) from the Go modules pinned in hack/kube-assets/, into a
# cache folder outside the repository that envtest-style tools read as KUBEBUILDER_ASSETS:
#
#   ${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/kube-assets/<kubernetes-version>/
#
# A second run with the same pins, Go version and flags finds the stamp file and returns in seconds.
# The last line printed is the folder, so `KUBEBUILDER_ASSETS=$(hack/build-kube-assets.sh | tail -1)`
# works. Set SNOOZE_KUBE_ASSETS_FORCE=1 to rebuild anyway.
#
#   --print-folder   print the folder if the binaries of the pinned version are there, else exit 1;
#                    never builds and needs no Go (the e2e suite uses it to find the binaries)
#   --print-stamp    print the cache key of this checkout and Go, and exit
set -euo pipefail
mode="${1:-build}"

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=hack/lib/go-build.sh
source "$repo_root/hack/lib/go-build.sh"
modules="$repo_root/hack/kube-assets"

# The versions are read from the wrapper go.mod files, so the pins live in exactly one place.
k8s_version="$(go_pinned_version "$modules/kubernetes/go.mod" k8s.io/kubernetes)"
etcd_version="$(go_pinned_version "$modules/etcd/go.mod" go.etcd.io/etcd/server/v3)"
if [[ -z "$k8s_version" || -z "$etcd_version" ]]; then
  echo "build-kube-assets: cannot read the pinned versions from $modules/*/go.mod" >&2
  exit 1
fi

cache_root="${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/kube-assets"
out="$cache_root/$k8s_version"
binaries=(etcd kube-apiserver kube-controller-manager kubectl)

if [[ "$mode" == "--print-folder" ]]; then
  for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || exit 1; done
  echo "$out"
  exit 0
fi

go_build_env
go_version="$(go env GOVERSION)"

minor="${k8s_version#v1.}"
minor="${minor%%.*}"
go_flags="-trimpath"
version_flags=""
# Stamp the version the way Kubernetes' own build does (hack/lib/version.sh); without it the server
# reports v0.0.0-master and clients or tools that check the server version misbehave.
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_flags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  version_flags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit="
done
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
date_flags=" -X k8s.io/component-base/version.buildDate=$build_date -X k8s.io/client-go/pkg/version.buildDate=$build_date"

# Everything that changes the binaries goes into the cache key: the pins (go.mod, go.sum), the
# etcd entry point, Go and the target, and the build flags (all but the build date). Editing a
# comment in this script does not cost a rebuild; changing a flag here does. Not go_build_stamp:
# that one hashes a final newline this key never had, and a changed key costs a rebuild everywhere.
stamp_input="$(
  cat "$modules/kubernetes/go.mod" "$modules/kubernetes/go.sum" "$modules/etcd/go.mod" \
    "$modules/etcd/go.sum" "$modules/etcd/main.go"
  echo "$go_version $(go env GOOS GOARCH) CGO_ENABLED=$CGO_ENABLED $go_flags -s -w$version_flags"
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

if [[ "${SNOOZE_KUBE_ASSETS_FORCE:-}" != "1" ]] && have_all; then
  echo "build-kube-assets: kubernetes $k8s_version, etcd $etcd_version already built (cached, ${go_version})" >&2
  echo "$out"
  exit 0
fi

go_build_begin build-kube-assets "$out" \
  "kubernetes $k8s_version (kube-apiserver, kube-controller-manager, kubectl) and etcd $etcd_version"
echo "build-kube-assets: this takes many minutes on a small machine the first time" >&2
work="$go_build_work"

# Not go_build_step: this build runs in the foreground of .ci/run, which waits for it, so it keeps
# the normal CPU priority rather than share the lowest with the builds in the background.
step() { # <label> <command...>: runs a build step and reports how long it took
  local label="$1" t0=$SECONDS
  shift
  echo "build-kube-assets: $label ..." >&2
  "$@" >&2
  echo "build-kube-assets: $label done in $((SECONDS - t0))s" >&2
}

step "download modules" bash -c "cd '$modules/kubernetes' && go mod download && cd '$modules/etcd' && go mod download"
step "build etcd $etcd_version" bash -c "cd '$modules/etcd' && go build $go_flags -ldflags '-s -w' -o '$work/etcd' ."
step "build kube-apiserver, kube-controller-manager, kubectl $k8s_version" bash -c "cd '$modules/kubernetes' && \
  go build $go_flags -ldflags '-s -w$version_flags$date_flags' -o '$work/' \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl"

# Smoke-test the results. No `| head` here: with pipefail, SIGPIPE to etcd would fail the build.
"$work/kube-apiserver" --version >&2
etcd_says="$("$work/etcd" --version)"
echo "${etcd_says%%$'\n'*}" >&2
go_build_done build-kube-assets "$out" "$stamp" "$out" "use KUBEBUILDER_ASSETS=$out"
