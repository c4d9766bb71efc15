#!/usr/bin/env bash
# The whole benchmark pass, for the GPU machine, after the build:
#
#   bench/run-all.sh [--quick] BUILD_DIR OUT_DIR
#
# Runs memres-bench for dmr (pairs, random, threads), pinned (pairs, copy), vmm (pairs, grow, lookup),
# ipc (pairs, import of the pool and of buffers), graph (allocate+free pairs inside a stream
# capture), managed (pairs on the current managed pool) and the cache adaptor (cache>dmr: pairs,
# random, pairs on 1-16 threads, alternating streams; cache>host: pairs, the core's own cost,
# against host) and the arena (pairs, random, pairs on 1-16 threads) where those kinds are built,
# then bench/torch-bench.sh (PyTorch's C++ caching allocator against cache>dmr; skipped without
# torch), bench/peers.py (cuda.core, PyTorch, CuPy, memres through ctypes), then bench/report.py.
# Leaves in OUT_DIR: RESULTS.md, latency.png (when matplotlib is there), bench-raw.json (every
# result) and bench.log (progress, errors); without --quick also writes bench/RESULTS.md and
# bench/latency.png in the source tree. A step that fails or runs past its time limit is
# recorded and the rest goes on. Prints RESULTS.md at the end, then its targets table once more.
# About 4 minutes on an H200; each step is capped, and all steps together stop within 8 minutes
# (STEPS_BUDGET_S, below): a step that would run past it gets a shorter time limit, or is not
# started.
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

# Seconds for all steps together, a hard kill included; the report takes about a second more.
STEPS_BUDGET_S=440
GRACE_S=15 # between a step's --time-limit (rows that would start later are skipped) and its kill
KILL_S=5   # between SIGTERM and SIGKILL

# step NAME SECONDS COMMAND...: runs COMMAND --time-limit SECONDS, killed GRACE_S later (or
# sooner, at the end of the budget); stdout to $work/NAME.json, stderr to the log, the command
# and its fate to $work/steps.tsv (read by report.py; exit 124 for a step the budget skipped).
step() {
  local name=$1 soft=$2 rc started left
  shift 2
  started=$(date +%s)
  left=$((t0 + STEPS_BUDGET_S - started - KILL_S))
  [ $((soft + GRACE_S)) -le "$left" ] || soft=$((left - GRACE_S))
  if [ "$soft" -lt 5 ]; then
    echo "run-all.sh: $name skipped: the ${STEPS_BUDGET_S} s budget is spent" | tee -a "$log" >&2
    rc=124
  else
    set -- "$@" --time-limit "$soft"
    echo "== $name: $*" | sed "s|$build/||g; s|$src/||g" >>"$log"
    echo "run-all.sh: $name ..." >&2
    timeout --kill-after=$KILL_S $((soft + GRACE_S)) "$@" >"$work/$name.json" 2>>"$log"
    rc=$?
  fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - started))" \
    "$(echo "$*" | sed "s|$build/||g; s|$src/||g")" >>"$work/steps.tsv"
  [ $rc -eq 0 ] || echo "run-all.sh: $name exited $rc (see bench.log)" >&2
}

t0=$(date +%s)
: >"$work/steps.tsv"
# Each step gets a time limit (rows that would start later are skipped and marked so) and,
# GRACE_S beyond it, a hard timeout; together at most STEPS_BUDGET_S.
step dmr 50 "$bench" $quick --json --spec dmr
if has_kind pinned; then
  step pinned 40 "$bench" $quick --json --spec pinned --pairs --copy
fi
if has_kind vmm; then
  step vmm 45 "$bench" $quick --json --spec vmm --pairs --vmm-grow --lookup
fi
if has_kind ipc; then
  step ipc 30 "$bench" $quick --json --spec ipc --pairs --ipc-import
fi
if has_kind graph; then
  step graph 15 "$bench" $quick --json --spec graph --graph-capture
fi
# the current managed pool (CUDA 13) against cuMemAllocFromPoolAsync/cuMemFreeAsync on it
if has_kind managed; then
  step managed 20 "$bench" $quick --json --spec managed --pairs
fi
if has_kind cache; then
  step cache 100 "$bench" $quick --json --spec 'cache>dmr' --pairs --sizes 256,4KiB,64KiB,1MiB,16MiB \
    --random --thread-pairs --alternating
  step cache_host 20 "$bench" $quick --json --spec 'cache>host' --pairs --core --core-base host \
    --sizes 256,4KiB,64KiB,1MiB,16MiB
  # not a memres-bench step: its own time limit, and JSON to torch.json (or {"skipped": ...})
  echo "== torch: bench/torch-bench.sh $quick BUILD" >>"$log"
  echo "run-all.sh: torch ..." >&2
  started=$(date +%s)
  timeout --kill-after=$KILL_S 60 "$src/bench/torch-bench.sh" $quick "$build" "$work/torch.json" \
    >>"$log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\t%s\n' torch "$rc" "$(($(date +%s) - started))" \
    "bench/torch-bench.sh $quick BUILD" >>"$work/steps.tsv"
fi
# the arena (issue 38, target 5): pairs at the sizes its classes serve and above, the random
# workload's peak reserved against its peak used, pairs on 1-16 threads (with the ceiling, three
# variants of repetitions of at least 100 ms: about 30 s of the step)
if has_kind arena; then
  step arena 70 "$bench" $quick --json --spec arena --pairs --sizes 256,4KiB,64KiB,1MiB,16MiB \
    --random --thread-pairs
fi
if command -v "$python" >/dev/null; then
  step peers 80 "$python" "$src/bench/peers.py" $quick --json --libmemres "$lib" \
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
