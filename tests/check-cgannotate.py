#!/usr/bin/env python3
"""check-cgannotate.py BENCH_DIR: bench/cgannotate.py, the one reader of callgrind_annotate's
output that bench/callgrind-pairs.py and bench/sleep-callgrind.py share (Meson test
`cgannotate`, suite core): a fixed output of callgrind 3.19 read back (the total, each row's
count without its commas and percentage, the rest of the row as written, a function listed twice
kept twice, header and blank lines skipped); then, where valgrind is installed, a real dump of
/bin/true: a total above 0 that the rows do not pass."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
import cgannotate  # noqa: E402

TEXT = """--------------------------------------------------------------------------------
Profile data file 'cg.out' (creator: callgrind-3.19.0)
--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
12,345,678 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                  file:function
--------------------------------------------------------------------------------
 1,200,000 ( 9.72%)  ../core/buffer.c:memres_resource_allocate [/b/core/libmemres.so.2.0.0]
       356 ( 0.00%)  ../plugins/cache/cache-alloc.c:cache_allocate [/b/plugins/cache/libmemres-cache.so]
       300            ???:memres_resource_raise_segment_event
       200            core/segments.c:memres_resource_raise_segment_event [/b/core/libmemres.so.2.0.0]
"""

failed = 0


def check(ok, what):
    global failed
    print(("ok: " if ok else "FAILED: ") + what)
    failed += not ok


total, rows = cgannotate.parse(TEXT)
check(total == 12345678, "PROGRAM TOTALS without its commas: %r" % total)
check(rows == [
    (1200000, "../core/buffer.c:memres_resource_allocate [/b/core/libmemres.so.2.0.0]"),
    (356, "../plugins/cache/cache-alloc.c:cache_allocate [/b/plugins/cache/libmemres-cache.so]"),
    (300, "???:memres_resource_raise_segment_event"),
    (200, "core/segments.c:memres_resource_raise_segment_event [/b/core/libmemres.so.2.0.0]")],
    "the rows, in order, a function listed twice kept twice: %r" % rows)
check(cgannotate.parse("") == (None, []), "no output: no total, no rows")

if shutil.which("valgrind") and shutil.which("callgrind_annotate"):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, "/bin/true"],
                       check=True, capture_output=True)
        for inclusive in (False, True):
            total, rows = cgannotate.annotate(out, inclusive=inclusive)
            check(total is not None and total > 0 and rows and
                  all(0 < ir <= total for ir, _ in rows),
                  "a dump of /bin/true (inclusive=%s): total %r, %d rows" % (inclusive, total,
                                                                              len(rows)))
else:
    print("valgrind is not installed: the real dump is not read")
sys.exit(1 if failed else 0)
