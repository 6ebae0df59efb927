# Shared steps of the hack/build-*.sh scripts that build pinned Go modules into a cache folder
# outside the repository. Source it; it defines functions only. Each script keeps its own pins,
# cache folder and smoke test, and calls:
#
#   go_pinned_version <go.mod> <module>
#                                    the version the wrapper module requires, so a pin lives in one place
#   go_build_cached <out> <stamp> <force>
#                                    whether <out> holds the build of <stamp> (and <force> is not 1)
#   go_build_env                     never fetch another toolchain; static, reproducible builds
#   go_build_stamp <file>... -- <words>
#                                    the cache key: the files' bytes, Go, the target and the words
#                                    (the flags), so editing a comment in a script costs no rebuild;
#                                    build-keda.sh and build-kube-assets.sh keep their own (it hashes
#                                    without the final newline; changing it rebuilds every cache)
#   go_build_step <tag> <label> <command...>
#                                    run a step at the lowest CPU priority, timed, output on stderr
#   go_build_swap_in <work> <out>    replace <out> by the finished <work> folder in one rename, so a
#                                    reader never sees a half-built folder
#   go_build_reuse <tag> <mode> <out> <stamp> <force> <result> <what> <complete-check...>
#                                    the steps before a build: `--print-stamp` prints <stamp>; a
#                                    build of <stamp> in <out> that <complete-check> finds whole is
#                                    reused. Either way it prints (<result> on stdout) and exits;
#                                    otherwise it returns and the script builds
#   go_build_begin <tag> <out> <description>
#                                    announce the build and make its work folder ($go_build_work,
#                                    beside <out>; removed if the script fails)
#   go_build_done <tag> <out> <stamp> <result> [<where>]
#                                    stamp the work folder, swap it in as <out>, say how long it took
#                                    and print <result> last, for `$(hack/build-x.sh | tail -1)`

go_pinned_version() {
  awk -v m="$2" '($1 == "require" && $2 == m) { print $3; exit } ($1 == m && $2 ~ /^v/) { print $2; exit }' "$1"
}

go_build_cached() {
  [[ "$3" != "1" && -f "$1/.stamp" && "$(cat "$1/.stamp")" == "$2" ]]
}

go_build_env() {
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
}

go_build_stamp() {
  local files=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do files+=("$1"); shift; done
  [[ "${1:-}" == "--" ]] && shift
  {
    cat "${files[@]}"
    echo "$(go env GOVERSION) $(go env GOOS GOARCH) CGO_ENABLED=$CGO_ENABLED $*"
  } | sha256sum | cut -d' ' -f1
}

go_build_step() {
  local tag="$1" label="$2" t0=$SECONDS
  shift 2
  echo "$tag: $label ..." >&2
  nice -n 19 "$@" >&2
  echo "$tag: $label done in $((SECONDS - t0))s" >&2
}

go_build_swap_in() {
  local work="$1" out="$2"
  chmod 755 "$work"
  rm -rf "$out.old"
  [[ -d "$out" ]] && mv "$out" "$out.old"
  mv "$work" "$out"
  rm -rf "$out.old"
}

go_build_reuse() {
  local tag="$1" mode="$2" out="$3" stamp="$4" force="$5" result="$6" what="$7"
  shift 7
  if [[ "$mode" == "--print-stamp" ]]; then
    echo "$stamp"
    exit 0
  fi
  if go_build_cached "$out" "$stamp" "$force" && "$@"; then
    echo "$tag: $what already built (cached, $(go env GOVERSION))" >&2
    echo "$result"
    exit 0
  fi
}

go_build_begin() {
  local tag="$1" out="$2" description="$3"
  go_build_started=$SECONDS
  echo "$tag: building $description with $(go env GOVERSION) into $out" >&2
  mkdir -p "$(dirname "$out")"
  go_build_work="$(mktemp -d "$(dirname "$out")/.build.XXXXXX")"
  # shellcheck disable=SC2064 # the folder's name is fixed now, on purpose
  trap "rm -rf '$go_build_work'" EXIT
}

go_build_done() {
  local tag="$1" out="$2" stamp="$3" result="$4" where="${5:-}"
  echo "$stamp" >"$go_build_work/.stamp"
  go_build_swap_in "$go_build_work" "$out"
  trap - EXIT
  echo "$tag: built in $((SECONDS - go_build_started))s${where:+; $where}" >&2
  echo "$result"
}
