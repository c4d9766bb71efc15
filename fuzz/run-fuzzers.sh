#!/bin/sh
# Builds the libFuzzer targets with clang into their own build directory and runs each for a
# while. Usage: fuzz/run-fuzzers.sh [SECONDS] [TARGET...]
#   SECONDS  time per target (default 60; MEMRES_FUZZ_SECONDS overrides the default)
#   TARGET   spec, descriptor, layout, dlpack, fabric (default: all)
# Environment: MEMRES_FUZZ_BUILDDIR (default build-fuzz), MEMRES_FUZZ_JOBS (parallel fuzzing
# jobs per target, default 1), MEMRES_FUZZ_ARGS (more libFuzzer flags).
# Crashes land in $BUILDDIR/fuzz/artifacts/<target>/; new inputs in $BUILDDIR/fuzz/corpus/.
# The exit status is non-zero when a target found a crash, a leak or undefined behaviour.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
seconds=${1:-${MEMRES_FUZZ_SECONDS:-60}}
[ $# -gt 0 ] && shift
targets=${*:-spec descriptor layout dlpack fabric}
builddir=${MEMRES_FUZZ_BUILDDIR:-$top/build-fuzz}
jobs=${MEMRES_FUZZ_JOBS:-1}

case $seconds in
  ''|*[!0-9]*) echo "run-fuzzers.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 2 ;;
esac

if [ ! -d "$builddir" ]; then
  # The whole project gets coverage instrumentation (fuzzer-no-link) and the sanitizers, so
  # that libFuzzer sees inside the core code it calls.
  CC=${CC:-clang} CXX=${CXX:-clang++} meson setup "$builddir" "$top" \
    -Dfuzzing=true -Dtests=false -Dbuildtype=debug \
    -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
fi
ninja -C "$builddir" -j2 $(for t in $targets; do printf 'fuzz/fuzz-%s ' "$t"; done)

parallel=
if [ "$jobs" -gt 1 ]; then
  parallel="-jobs=$jobs -workers=$jobs"
fi

status=0
for t in $targets; do
  corpus="$builddir/fuzz/corpus/$t"
  artifacts="$builddir/fuzz/artifacts/$t/"
  mkdir -p "$corpus" "$artifacts"
  echo "== fuzz-$t: $seconds s (seeds: fuzz/corpus/$t)"
  # New inputs go to the first corpus directory (the build's); the seeds are only read.
  if ! ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
       UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
       "$builddir/fuzz/fuzz-$t" -max_total_time="$seconds" $parallel \
         -artifact_prefix="$artifacts" -print_final_stats=1 ${MEMRES_FUZZ_ARGS:-} \
         "$corpus" "$here/corpus/$t"; then
    echo "== fuzz-$t FAILED: see $artifacts" >&2
    status=1
  fi
done
exit $status
