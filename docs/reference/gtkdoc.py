#!/usr/bin/env python3
"""The API reference with gtk-doc, as a build step that runs only when its inputs change.

Meson's gnome.gtkdoc() makes a target that is always stale: every `meson compile` ran the
scanner, mkdb, mkhtml and fixxref again (tens of seconds), whatever changed. This script is the
command of an ordinary custom_target instead (docs/reference/meson.build): it runs the same four
gtk-doc tools and writes a depfile naming every file they read (the main XML, the headers, every
C file and header of the directories whose comments document the API), so that ninja runs it
again only when one of them changes.

  gtkdoc.py build --out DIR --stamp FILE --depfile FILE --main XML --module NAME
                  [--header-dir D]... [--comment-dir D]... [--ignore-header H]...
                  [--scan-arg A]... [--mkdb-arg A]...
  gtkdoc.py install HTMLDIR SUBDIR   (a Meson install script: HTMLDIR copied to
                                      $MESON_INSTALL_DESTDIR_PREFIX/SUBDIR, replacing it)
"""
import argparse
import os
import shutil
import subprocess
import sys


def run(cmd, cwd):
    """Runs a gtk-doc tool in cwd; its output printed (warnings), a failure raised with it."""
    result = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, check=False)
    if result.stdout:
        sys.stdout.write(result.stdout)
    if result.returncode != 0:
        sys.exit("%s failed with status %d" % (cmd[0], result.returncode))


def sources_of(dirs):
    """Every .c and .h file under dirs (gtkdoc-mkdb reads its source dirs recursively)."""
    found = []
    for top in dirs:
        for root, subdirs, files in os.walk(top):
            subdirs.sort()
            found += [os.path.join(root, f) for f in sorted(files) if f.endswith((".c", ".h"))]
    return found


def depfile_escape(path):
    return path.replace("\\", "\\\\").replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")


def build(args):
    out = os.path.abspath(args.out)
    html = os.path.join(out, "html")
    main = os.path.basename(args.main)
    os.makedirs(out, exist_ok=True)
    shutil.copyfile(args.main, os.path.join(out, main))
    header_dirs = ["--source-dir=" + d for d in args.header_dir]
    comment_dirs = ["--source-dir=" + d for d in args.comment_dir]

    scan = ["gtkdoc-scan", "--module=" + args.module] + header_dirs + args.scan_arg
    if args.ignore_header:
        scan.append("--ignore-headers=" + " ".join(args.ignore_header))
    run(scan, out)
    run(["gtkdoc-mkdb", "--module=" + args.module, "--output-format=xml",
         "--main-sgml-file=" + main] + header_dirs + comment_dirs + args.mkdb_arg, out)
    shutil.rmtree(html, ignore_errors=True)
    os.mkdir(html)
    run(["gtkdoc-mkhtml", "--path=" + os.pathsep.join((os.path.dirname(os.path.abspath(args.main)),
                                                       out)),
         args.module, "../" + main], html)
    run(["gtkdoc-fixxref", "--module=" + args.module, "--module-dir=html"], out)

    inputs = [os.path.abspath(args.main)] + sources_of(args.header_dir + args.comment_dir)
    with open(args.depfile, "w", encoding="utf-8") as dep:
        dep.write("%s: %s\n" % (depfile_escape(args.stamp),
                                " \\\n  ".join(depfile_escape(p) for p in inputs)))
    with open(args.stamp, "w", encoding="utf-8") as stamp:
        stamp.write("%d files read\n" % len(inputs))


def install(htmldir, subdir):
    prefix = os.environ.get("MESON_INSTALL_DESTDIR_PREFIX")
    if prefix is None:
        sys.exit("install: run by meson install (MESON_INSTALL_DESTDIR_PREFIX is not set)")
    dest = os.path.join(prefix, subdir)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(htmldir, dest)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "install":
        install(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--out", required=True)
    parser.add_argument("--stamp", required=True)
    parser.add_argument("--depfile", required=True)
    parser.add_argument("--main", required=True)
    parser.add_argument("--module", required=True)
    for many in ("header-dir", "comment-dir", "ignore-header", "scan-arg", "mkdb-arg"):
        parser.add_argument("--" + many, action="append", default=[])
    build(parser.parse_args())


if __name__ == "__main__":
    main()
