#!/usr/bin/env bash
# Installs what `npm run bench` needs besides Node: nginx (the proxy yardstick)
# and wrk (the HTTP load generator), from Debian packages. Idempotent: does
# nothing when both are present; refreshes the package lists only when a
# package cannot be found in them.
set -euo pipefail

missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
    echo "install-tools: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
else
  sudo=()
fi

export DEBIAN_FRONTEND=noninteractive
# apt-get update only when the lists do not know a package yet (a fresh image has none).
for pkg in "${missing[@]}"; do
  if ! apt-cache show "$pkg" >/dev/null 2>&1; then
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
    break
  fi
done
echo "install-tools: installing ${missing[*]}" >&2
"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The package may start the system nginx on port 80; the benchmark runs its own
# instances, so stop that one (only it: the default pid file names it).
if [ -s /run/nginx.pid ]; then
  "${sudo[@]}" /usr/sbin/nginx -s quit >/dev/null 2>&1 || true
fi
