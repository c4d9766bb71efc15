#!/usr/bin/env bash
# The whole benchmark pass, for the GPU machine, after the build:
#
#   bench/run-all.sh [--quick] BUILD_DIR OUT_DIR
#
# Runs memres-bench for dmr (pairs, random, threads), pinned (pairs, copy), vmm (pairs, grow)
# and ipc (pairs) where those kinds are built, then bench/peers.py (cuda.core, PyTorch, CuPy,
# memres through ctypes), then bench/report.py. Leaves in OUT_DIR: RESULTS.md, latency.png (when
# matplotlib is there), bench-raw.json (every result) and bench.log (progress, errors); without
# --quick also writes bench/RESULTS.md and bench/latency.png in the source tree. A step that
# fails or runs past its time limit is recorded and the rest goes on. Prints RESULTS.md at the
# end, then its targets table once more. About 1.5 minutes on an H200; each step is capped, all
# caps together 5 minutes.
# --quick runs everything small (the fake-driver smoke test uses it; timings mean nothing).
# PEERS=memres,python (say) limits peers.py to those; PYTHON names the interpreter.
set -u

quick=
if [ "${1:-}" = --quick ]; then
  quick=--quick
  shift
fi
if [ $# -ne 2 ]; then
  echo "usage: $0 [--quick] BUILD_DIR OUT_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && out=$(cd "$2" && pwd) || exit 2
src=$(cd "$(dirname "$0")/.." && pwd)
bench=$build/bench/memres-bench
lib=$build/core/libmemres.so
work=$(mktemp -d "${TMPDIR:-/tmp}/memres-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$out/bench.log
: >"$log"
python=${PYTHON:-python3}

if [ ! -x "$bench" ] || [ ! -e "$lib" ]; then
  echo "run-all.sh: $bench or $lib is missing: build first (meson compile -C BUILD_DIR)" >&2
  exit 1
fi
if [ -z "${MEMRES_PLUGIN_PATH:-}" ]; then
  MEMRES_PLUGIN_PATH=$(find "$build/plugins" -name 'libmemres-*.so' -printf '%h\n' 2>/dev/null |
    sort -u | paste -sd: -)
  export MEMRES_PLUGIN_PATH
fi
export LD_LIBRARY_PATH="$build/core${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MEMRES_LIBMEMRES=$lib PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

has_kind() {
  local d
  IFS=: read -ra dirs <<<"$MEMRES_PLUGIN_PATH"
  for d in "${dirs[@]}"; do
    [ -e "$d/libmemres-$1.so" ] && return 0
  done
  return 1
}

# step NAME SECONDS COMMAND...: stdout to $work/NAME.json, stderr to the log, the command and its
# fate to $work/steps.tsv (read by report.py).
step() {
  local name=$1 limit=$2 rc started
  shift 2
  started=$(date +%s)
  echo "== $name: $*" | sed "s|$build/||g; s|$src/||g" >>"$log"
  echo "run-all.sh: $name ..." >&2
  timeout --kill-after=10 "$limit" "$@" >"$work/$name.json" 2>>"$log"
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - started))" \
    "$(echo "$*" | sed "s|$build/||g; s|$src/||g")" >>"$work/steps.tsv"
  [ $rc -eq 0 ] || echo "run-all.sh: $name exited $rc (see bench.log)" >&2
}

t0=$(date +%s)
: >"$work/steps.tsv"
# Each step gets a time limit (rows that would start later are skipped and marked so) and,
# 15 s beyond it, a hard timeout.
step dmr 65 "$bench" $quick --json --time-limit 50 --spec dmr
if has_kind pinned; then
  step pinned 55 "$bench" $quick --json --time-limit 40 --spec pinned --pairs --copy
fi
if has_kind vmm; then
  step vmm 55 "$bench" $quick --json --time-limit 40 --spec vmm --pairs --vmm-grow
fi
if has_kind ipc; then
  step ipc 35 "$bench" $quick --json --time-limit 20 --spec ipc --pairs
fi
if command -v "$python" >/dev/null; then
  step peers 95 "$python" "$src/bench/peers.py" $quick --json --time-limit 80 --libmemres "$lib" \
    ${PEERS:+--peers "$PEERS"}
  report_args=(--input "$work" --output "$out" --run-all "bench/run-all.sh $quick BUILD OUT")
  [ -n "$quick" ] || report_args+=(--copy-to "$src/bench")
  "$python" "$src/bench/report.py" "${report_args[@]}" 2>>"$log"
  rc=$?
else
  echo "run-all.sh: no $python: no peers, no report; raw JSON only" >&2
  cp "$work"/*.json "$out"/ 2>/dev/null
  rc=1
fi
echo "run-all.sh: done in $(($(date +%s) - t0)) s; results in $out" >&2
if [ -e "$out/RESULTS.md" ]; then
  cat "$out/RESULTS.md"
  # the targets once more, last, so that the tail of a long log shows them
  echo
  awk '/^## Targets/ { on = 1 } /^## / && !/^## Targets/ { on = 0 } on' "$out/RESULTS.md"
fi
exit $rc
