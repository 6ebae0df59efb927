#!/usr/bin/env bash
# Builds the OCI image of Snooze without any container registry: a minimal Debian root file system
# made from Debian's packages by mmdebstrap (one layer), and on it the pinned Node 24 (the `node`
# devDependency's binary), the app with its production dependencies only, and the entrypoint
# `snooze` (a second layer). umoci writes it as an OCI image layout in a cache folder outside the
# repository:
#
#   ${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/image/oci      the OCI layout (tag: the package version)
#   ${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/image/base-<stamp>.tar   the Debian layer, kept
#   ${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/image/deps-<stamp>/      the production node_modules, kept
#
# A second run with the same inputs (this script, the Debian suite and packages, the app's files,
# package-lock.json, the Node binary) finds the stamp and returns at once; a change to the app only
# rebuilds the app layer (seconds), not the Debian one (minutes), and installs no dependencies. The last three lines printed are
# the image's name:tag, its manifest digest and the layout's path, so
# `read -r tag digest layout < <(hack/build-image.sh | tail -n 3 | paste -sd' ')` works.
# SNOOZE_IMAGE_FORCE=1 rebuilds anyway (the Debian layer too: new security updates).
#
#   --print-tag     print the image's name:tag (what config/default/kustomization.yaml names), and exit
#   --print-stamp   print the cache key of this checkout, and exit
#
# Needs root (mmdebstrap's root mode; `sudo` is used when not root) and, when missing, installs
# Debian's mmdebstrap and umoci with apt-get.
set -euo pipefail
mode="${1:-build}"

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
node="$repo_root/node_modules/node/bin/node"
if [[ ! -x "$node" ]]; then
  echo "build-image: $node is missing: run npm ci first (the image takes Node from the node devDependency)" >&2
  exit 1
fi
version="$("$node" -p 'require(process.argv[1]).version' "$repo_root/package.json")"
name="snooze/snooze"
tag="$version"
if [[ "$mode" == "--print-tag" ]]; then
  echo "$name:$tag"
  exit 0
fi

cache="${SNOOZE_CACHE_DIR:-$HOME/.cache/snooze}/image"
layout="$cache/oci"

# The Debian layer: the `essential` set (libc, dash, coreutils, ...) plus what Node needs
# (libstdc++6) and the CA certificates (TLS to an event sink or an OTLP collector); no apt, no docs.
suite="bookworm"
debian_args=(
  --variant=essential
  --include=libstdc++6,ca-certificates
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
  # The apt sources are this machine's (mmdebstrap uses them when given no mirror): not the image's.
  --customize-hook='rm -f "$1"/etc/apt/sources.list "$1"/etc/apt/sources.list.d/*'
)
base_stamp="$(printf '%s\n' "$suite" "${debian_args[@]}" | sha256sum | cut -c1-16)"
base="$cache/base-$base_stamp.tar"

# The app: what `snooze` loads at run time (test/product-imports.test.ts keeps product files to
# package.json's dependencies), the simulator behind `snooze sim`, and no tests.
app_folders=(activator autoscaler bin cli lib webhooks hack/sim)
app_files() {
  (cd "$repo_root" && find "${app_folders[@]}" -type f ! -name '*.test.ts' ! -name '*.md' | LC_ALL=C sort)
}
stamp="$(
  {
    cat "$0"
    echo "$base_stamp"
    (cd "$repo_root" && app_files | xargs sha256sum && sha256sum package.json package-lock.json)
    "$node" --version
    sha256sum "$node"
  } | sha256sum | cut -c1-32
)"
if [[ "$mode" == "--print-stamp" ]]; then
  echo "$stamp"
  exit 0
fi

digest_of() {
  "$node" -e '
    const index = JSON.parse(require("node:fs").readFileSync(process.argv[1] + "/index.json", "utf8"));
    const m = index.manifests.find((d) => d.annotations?.["org.opencontainers.image.ref.name"] === process.argv[2]);
    if (!m) process.exit(1);
    console.log(m.digest);' "$1" "$tag"
}

finish() {
  echo "$name:$tag"
  echo "$1"
  echo "$layout"
}

if [[ "${SNOOZE_IMAGE_FORCE:-}" != "1" && -f "$cache/stamp" && "$(cat "$cache/stamp")" == "$stamp" ]] &&
  digest="$(digest_of "$layout" 2>/dev/null)"; then
  echo "build-image: $name:$tag already built (cached, stamp $stamp)" >&2
  finish "$digest"
  exit 0
fi

as_root=()
[[ "$(id -u)" -eq 0 ]] || as_root=(sudo)
missing=()
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v umoci >/dev/null || missing+=(umoci)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "build-image: installing ${missing[*]} (Debian packages)" >&2
  # Another apt on the machine (an install by hand, CI's chromium step) may hold dpkg's lock for a
  # while: wait for it rather than fail the build.
  "${as_root[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

started="$(date +%s)"
mkdir -p "$cache"
work="$(mktemp -d "$cache/build.XXXXXX")"
trap '"${as_root[@]}" rm -rf "$work"' EXIT

if [[ "${SNOOZE_IMAGE_FORCE:-}" == "1" || ! -f "$base" ]]; then
  echo "build-image: the Debian $suite layer (mmdebstrap, takes minutes)" >&2
  # SOURCE_DATE_EPOCH: the same packages give the same tar.
  SOURCE_DATE_EPOCH=0 "${as_root[@]}" mmdebstrap "${debian_args[@]}" "$suite" "$work/base.tar" >&2
  mv "$work/base.tar" "$base"
  # Older Debian layers are of no use any more.
  find "$cache" -maxdepth 1 -name 'base-*.tar' ! -name "base-$base_stamp.tar" -delete
fi

echo "build-image: the app layer (Node $("$node" --version), production dependencies)" >&2
root="$work/app"
app="$root/opt/snooze"
mkdir -p "$app" "$root/usr/local/bin"
(cd "$repo_root" && app_files | tar -cf - -T - package.json package-lock.json) | tar -xf - -C "$app"
# Only the dependencies; no install scripts (none of them needs one), nothing from the checkout's
# node_modules. Kept by the lock file's stamp: an app change does not install them again.
deps_stamp="$(cat "$repo_root/package.json" "$repo_root/package-lock.json" | sha256sum | cut -c1-16)"
deps="$cache/deps-$deps_stamp"
if [[ "${SNOOZE_IMAGE_FORCE:-}" == "1" || ! -d "$deps/node_modules" ]]; then
  (cd "$app" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  rm -rf "$deps" "$deps.tmp"
  mkdir -p "$deps.tmp"
  cp -a "$app/node_modules" "$deps.tmp/"
  mv "$deps.tmp" "$deps"
  find "$cache" -maxdepth 1 -name 'deps-*' ! -name "deps-$deps_stamp" -exec rm -rf {} +
else
  cp -a "$deps/node_modules" "$app/"
fi
rm -f "$app/package-lock.json"
cp "$node" "$root/usr/local/bin/node"
ln -s /opt/snooze/bin/snooze.js "$root/usr/local/bin/snooze"
chmod -R a+rX "$root"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$work/app.tar" -C "$root" .

echo "build-image: the OCI layout (umoci)" >&2
next="$work/oci"
created="1970-01-01T00:00:00Z"
umoci init --layout "$next"
umoci new --image "$next:$tag"
umoci raw add-layer --image "$next:$tag" --history.created "$created" \
  --history.created_by "mmdebstrap ${debian_args[*]} $suite" "$base"
umoci raw add-layer --image "$next:$tag" --history.created "$created" \
  --history.created_by "hack/build-image.sh: Node $("$node" --version), /opt/snooze" "$work/app.tar"
# Runs as the non-root user the manifests ask for (runAsUser 65532); the Node compile cache goes to
# /tmp (an emptyDir where the root file system is read-only, and silently off without one).
umoci config --image "$next:$tag" --created "$created" --history.created "$created" \
  --os linux --architecture amd64 \
  --config.entrypoint /usr/local/bin/snooze --config.cmd --help \
  --config.user 65532:65532 --config.workingdir /opt/snooze \
  --config.env PATH=/usr/local/bin:/usr/bin:/bin --config.env NODE_ENV=production \
  --config.label "org.opencontainers.image.title=snooze" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "dev.snooze.image.stamp=$stamp"
umoci gc --layout "$next"
"${as_root[@]}" rm -rf "$layout"
mv "$next" "$layout"
digest="$(digest_of "$layout")"
echo "$stamp" >"$cache/stamp"
echo "build-image: built $name:$tag ($digest) in $(($(date +%s) - started)) s" >&2
finish "$digest"
