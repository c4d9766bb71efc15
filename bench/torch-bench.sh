#!/usr/bin/env bash
# PyTorch's C++ caching allocator against memres's cache, on the GPU machine, in one command:
#
#   bench/torch-bench.sh [--quick] BUILD_DIR [OUT.json]
#
# Builds bench/torch-alloc.cpp with g++ against the torch that `python3 -c 'import torch'`
# finds (its headers, libc10 and libc10_cuda; the CUDA headers from CUDA_PATH or
# /usr/local/cuda) and memres's BUILD_DIR, runs it (pairs at 256 B to 16 MiB, paired ratios;
# 1-16 threads, aggregate pairs/s), prints the paired table and writes the JSON to OUT.json
# (default: stdout only). Where torch (or g++, or CUDA's headers) is absent it says so, writes
# {"skipped": REASON} and exits 0. PYTHON names the interpreter; SPEC the memres resource
# (default cache>dmr:device=0).
set -u
quick=
if [ "${1:-}" = --quick ]; then
  quick=--quick
  shift
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 [--quick] BUILD_DIR [OUT.json]" >&2
  exit 2
fi
build=$(cd "$1" && pwd) || exit 2
out=${2:-}
src=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
spec=${SPEC:-cache>dmr:device=0}

skip() {
  echo "torch-bench.sh: skipped: $1" >&2
  if [ -n "$out" ]; then
    printf '{"skipped": "%s"}\n' "$1" >"$out"
  fi
  exit 0
}

command -v g++ >/dev/null || skip "no g++"
torch_info=$("$python" -c 'import os, torch, torch.utils
print(os.path.dirname(os.path.dirname(torch.utils.cmake_prefix_path)))
print(torch.__version__)
print(int(torch.compiled_with_cxx11_abi()))' 2>/dev/null) || skip "no torch in $python"
torch_dir=$(sed -n 1p <<<"$torch_info")
torch_version=$(sed -n 2p <<<"$torch_info")
cxx11_abi=$(sed -n 3p <<<"$torch_info")
# torch.utils.cmake_prefix_path is TORCH/share/cmake: TORCH holds include/ and lib/
[ -d "$torch_dir/include" ] || torch_dir=$(dirname "$torch_dir")
[ -e "$torch_dir/lib/libc10_cuda.so" ] || skip "no libc10_cuda.so under $torch_dir/lib"
cuda_inc=${CUDA_PATH:-/usr/local/cuda}/include
[ -e "$cuda_inc/cuda_runtime_api.h" ] || skip "no CUDA headers in $cuda_inc"
[ -e "$build/core/libmemres.so" ] || skip "no $build/core/libmemres.so (build first)"

work=$(mktemp -d "${TMPDIR:-/tmp}/torch-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2046
if ! g++ -O2 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI="$cxx11_abi" -o "$work/torch-alloc" \
  "$src/bench/torch-alloc.cpp" \
  -I"$src/include" -I"$build/include" -I"$torch_dir/include" -I"$cuda_inc" \
  $(pkg-config --cflags glib-2.0) \
  -L"$build/core" -lmemres -L"$torch_dir/lib" -lc10_cuda -lc10 $(pkg-config --libs glib-2.0) \
  -Wl,-rpath,"$build/core" -Wl,-rpath,"$torch_dir/lib" -lpthread 2>"$work/build.log"; then
  cat "$work/build.log" >&2
  skip "torch-alloc.cpp does not build against torch $torch_version (see the log above)"
fi
if [ -z "${MEMRES_PLUGIN_PATH:-}" ]; then
  MEMRES_PLUGIN_PATH=$(find "$build/plugins" -name 'libmemres-*.so' -printf '%h\n' 2>/dev/null |
    sort -u | paste -sd: -)
  export MEMRES_PLUGIN_PATH
fi
"$work/torch-alloc" $quick --spec "$spec" --torch-version "$torch_version" >"$work/torch.json" || exit 1
[ -z "$out" ] || cp "$work/torch.json" "$out"
"$python" - "$work/torch.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("PyTorch %s caching allocator vs memres %s (paired, median [IQR] of %d repetitions)"
      % (d["torch_version"], d["memres_spec"], d["repetitions"]))
print("%-8s %12s %12s %22s %8s" % ("size", "torch ns", "memres ns", "memres/torch", "≥10×?"))
for r in d["pairs"]:
    print("%-8d %12.1f %12.1f %10.4f [%.4f-%.4f] %8s" % (
        r["size"], r["torch"]["median"], r["memres"]["median"], r["ratio"], r["ratio_q1"],
        r["ratio_q3"], "yes" if r["ratio"] <= 0.1 else "no"))
print("%-8s %16s %16s" % ("threads", "torch pairs/s", "memres pairs/s"))
for r in d["threads"]:
    print("%-8d %16.3g %16.3g" % (r["threads"], r["torch_pairs_per_s"]["median"],
                                  r["memres_pairs_per_s"]["median"]))
PY
