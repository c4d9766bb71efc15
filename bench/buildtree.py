"""What the bench scripts need to know of a Meson build tree of memres (shared by
bench/compare-builds.py and bench/callgrind-pairs.py)."""
import os


def plugin_path(build):
    """MEMRES_PLUGIN_PATH for the build tree BUILD: every directory under BUILD/plugins that
    holds a libmemres-*.so, joined with ':'."""
    dirs = set()
    for root, _, files in os.walk(os.path.join(build, "plugins")):
        if any(f.startswith("libmemres-") and f.endswith(".so") for f in files):
            dirs.add(root)
    return ":".join(sorted(dirs))
