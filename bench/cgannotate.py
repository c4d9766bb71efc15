"""callgrind_annotate's output read for the bench scripts (shared by bench/callgrind-pairs.py and
bench/sleep-callgrind.py): the program's total and each function's row."""
import re
import subprocess

# a row: the count (with commas), an optional "(12.3%)", then the rest ("FILE:FUNCTION [OBJECT]")
ROW = re.compile(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(.*)$")


def annotate(path, inclusive=False):
    """(the instructions of PROGRAM TOTALS or None, [(instructions, rest of the row), ...]) of the
    callgrind dump PATH, every function listed (--threshold=100), self counts or, with
    @inclusive, inclusive ones. callgrind_annotate may list a function twice (with and without
    its object): both rows are given."""
    cmd = ["callgrind_annotate"] + (["--inclusive=yes"] if inclusive else [])
    cmd += ["--auto=no", "--threshold=100", path]
    return parse(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def parse(text):
    """annotate()'s answer from callgrind_annotate's output TEXT."""
    total, rows = None, []
    for line in text.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        if "PROGRAM TOTALS" in line:
            total = ir
            continue
        rows.append((ir, m.group(2)))
    return total, rows
