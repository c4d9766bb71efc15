#!/usr/bin/env python3
"""pc-relocatable.py PCDIR NAME.pc: run by `meson install` (meson.add_install_script in
core/meson.build) on the memres-2.pc it installed into PCDIR (an absolute path under the prefix,
DESTDIR not included): every path in it is made relative to the file itself (${pcfiledir}), none
through ${prefix}, so that the install can be moved or unpacked anywhere (`meson install --destdir`
and a tarball of it) and pkg-config still answers for where it is now, with or without
`--define-prefix`. pkg-config's --define-prefix puts its own guess in ${prefix}: two directories
above the file, which for a multiarch libdir (lib/x86_64-linux-gnu/pkgconfig) is PREFIX/lib, not
PREFIX; with no other variable resting on ${prefix}, the guess changes nothing.

The file is rewritten whole (a temporary file beside it, renamed over it)."""
import os
import sys


def main():
    pcdir, name = sys.argv[1], sys.argv[2]
    prefix = os.environ["MESON_INSTALL_PREFIX"]
    # where the file is now: under DESTDIR, as meson put it (the prefix with DESTDIR before it)
    path = os.path.join(os.environ["MESON_INSTALL_DESTDIR_PREFIX"], os.path.relpath(pcdir, prefix),
                        name)
    up = os.path.relpath(prefix, pcdir)
    here = "${pcfiledir}" if up == "." else "${pcfiledir}/" + up
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out = []
    for line in lines:
        if line.startswith("prefix="):
            line = "prefix=" + here
        else:
            line = line.replace("${prefix}", here)
        out.append(line)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    os.chmod(tmp, os.stat(path).st_mode & 0o7777)
    os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
