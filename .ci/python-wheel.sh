#!/usr/bin/env bash
# .ci/python-wheel.sh: the Python package as a user installs it without a system install: a
# virtual environment made with --system-site-packages, `pip install --no-build-isolation .`
# through meson-python (Debian's python3-mesonpy), then the package imported from outside the
# source tree, with no MEMRES_PLUGIN_PATH or LD_LIBRARY_PATH: libmemres, the allocator shim and
# the plugins come from the wheel; allocate through a plugin (limit), against no driver.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Debian's interpreter: python3-mesonpy and the other python3-* packages are installed for it,
# not for another python3 that may come first on PATH (pyenv's, here)
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --no-build-isolation --no-index "$PWD"
cd "$work"
env -u MEMRES_PLUGIN_PATH -u LD_LIBRARY_PATH -u PYTHONPATH MEMRES_CUDA_DRIVER=/nonexistent \
  "$work/venv/bin/python" - <<'PY'
import os
import memres
here = os.path.dirname(memres.__file__)
assert memres.plugin_search_path()[0] == os.path.join(here, "plugins"), memres.plugin_search_path()
assert memres._memres.library_path().startswith(here), memres._memres.library_path()
assert os.path.isfile(os.path.join(here, "libmemres-allocator.so"))
mr = memres.Resource("limit:max=1MiB>host")
with mr.allocate(4096) as buf:
    buf.fill(7)
    assert buf.read(0, 2) == b"\x07\x07"
assert mr.kind == "limit" and "cache" in memres.kinds()
print("python-wheel: the package works from its wheel")
PY
