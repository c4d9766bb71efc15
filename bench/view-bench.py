#!/usr/bin/env python3
"""memres view at scale (issue 35's targets for the page): a log of --events events (default
1,000,000; the issue's scale is 10,000,000) is generated, `memres view` turns it into a page,
and headless Chromium opens it through the DevTools protocol (--remote-debugging-pipe, no
library): the page's size (target: at most 64 MB), the command's time, the first view (the
time from navigation to the page's DOM marker, `data-drawn`, as the page's performance.now()
reads it at the marker; target: at most 3 s) and --zooms zooms and pans (target: at most
100 ms each), each timed twice: the redraw's script alone, and from the call until the frame
after it (a requestAnimationFrame then a task: the new view painted). Times are printed, not
asserted: this is a benchmark (bench/RESULTS.md), not a test.

  bench/view-bench.py MEMRES [--events N] [--tags K] [--stacks S] [--zooms 20] [--keep DIR]
                       [--json F]

The log: allocations of 64 bytes to 4 KiB every 3 us on one thread, each freed 16 to 18
allocations later (the big log of tests/check-view.py), with --tags K a Tag column cycling
through K tags, with --stacks S a Backtrace column (log:backtrace=true) on every allocate line
cycling through S distinct stacks of 8 frames (frames shared among them, as a program's are).
Exits 77 without chromium (MEMRES_CHROMIUM names another; "none" skips)."""

import argparse
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def clock(us):
    return "%02d:%02d:%02d.%06d" % (us // 3600000000 % 24, us // 60000000 % 60,
                                     us // 1000000 % 60, us % 1000000)


def stack_fields(n):
    """@n distinct Backtrace fields of 8 frames: 6 of 32 functions of a program, chosen by the
    stack's number, the last of them unique to the stack, over 2 frames all share"""
    fn = ["train(_ZN1m%dEv+0x%x) [0x40%04x]" % (k, 16 * k, k) for k in range(32)]
    base = ["libc.so.6(__libc_start_main+0x85) [0x7f102a]", "train(_start+0x2a) [0x4010]"]
    return [";".join([fn[(i >> (3 * j)) % 32] for j in range(5)] +
                     ["train(_ZN4step%dEv+0x1%%3B) [0x41%04x]" % (i, i % 65536)] + base)
            for i in range(n)]


def write_log(path, n, tags, stacks=0):
    names = ["tag%d" % k for k in range(tags)]
    fields = stack_fields(stacks) if stacks else None
    with open(path, "w") as f:
        f.write("Thread,Time,Action,Pointer,Size,Stream%s%s\n" % (",Backtrace" if stacks else "",
                                                             ",Tag" if tags else ""))
        t, lines = 8 * 3600 * 10**6, []
        for i in range(n // 2):
            t += 3
            tag = ("," + names[i % tags]) if tags else ""
            if stacks:
                tag = "," + fields[i % stacks] + tag
            lines.append("1,%s,allocate,0x%x,%d,0x0%s\n" % (clock(t), 0x100000 + i * 64,
                                                          64 + (i * 7919) % 4096, tag))
            if i >= 16:
                j = i - 16 + (i % 3)
                tag = ("," + names[j % tags]) if tags else ""
                if stacks:
                    tag = "," + tag
                lines.append("1,%s,free,0x%x,%d,0x0%s\n" % (clock(t + 1), 0x100000 + j * 64,
                                                           64 + (j * 7919) % 4096, tag))
            if len(lines) > 200000:
                f.write("".join(lines))
                lines = []
        f.write("".join(lines))


class Browser:
    """Chromium headless, driven through --remote-debugging-pipe (fd 3 in, fd 4 out, messages
    ended by NUL)."""

    def __init__(self, chromium, profile):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        # the child's ends above 10 first, so that putting them at 3 and 4 clobbers neither
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w)]
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-extensions", "--hide-scrollbars", "--user-data-dir=" + profile,
                "--window-size=1280,900", "--force-device-scale-factor=1",
                "--remote-debugging-pipe", "about:blank"]

        def fds():
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS="disabled:")
        self.proc = subprocess.Popen(args, preexec_fn=fds, pass_fds=(3, 4),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        for fd in high:
            os.close(fd)
        self.buf, self.next_id, self.session = b"", 0, None

    def call(self, method, params=None, session=True, timeout=300):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            while b"\0" not in self.buf:
                chunk = os.read(self.from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply["result"]
        raise TimeoutError(method)

    def open(self, url):
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)
        self.session = self.call("Target.attachToTarget", {"targetId": target["targetId"],
                                                           "flatten": True},
                                 session=False)["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Performance.enable", {"timeDomain": "threadTicks"})
        t0 = time.monotonic()
        self.call("Page.navigate", {"url": url})
        while self.eval("(document.getElementById('memres-view-status') || {dataset: {}})"
                        ".dataset.drawn") != "1":
            if time.monotonic() - t0 > 120:
                raise TimeoutError("the page's marker")
            time.sleep(0.02)
        return time.monotonic() - t0

    def eval(self, expr, wait=False):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": wait})
        if "exceptionDetails" in r:
            raise RuntimeError(str(r["exceptionDetails"]))
        return r["result"].get("value")

    def thread_ms(self):
        """The CPU time the page's main thread used so far, in ms (Performance.getMetrics'
        ThreadTime): what a redraw costs whatever else the machine runs."""
        m = {x["name"]: x["value"] for x in self.call("Performance.getMetrics")["metrics"]}
        return m["ThreadTime"] * 1000

    def timed(self, call):
        """[script ms, ms until the frame after, main-thread CPU ms] of one call"""
        c0 = self.thread_ms()
        r = self.eval(TIMED % call, wait=True)
        return r[:2] + [self.thread_ms() - c0]

    def close(self):
        try:
            self.call("Browser.close", session=False, timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# one zoom or pan, timed: the redraw's script, then until the frame after it
TIMED = """new Promise(function (resolve) {
  const t0 = performance.now();
  %s;
  const script = performance.now() - t0;
  requestAnimationFrame(function () { setTimeout(function () {
    resolve([script, performance.now() - t0, Number(document.getElementById('memres-view-status').dataset.lastDrawMs)]); }, 0); });
})"""


def summary(xs):
    xs = sorted(xs)
    return {"min": round(xs[0], 1), "median": round(statistics.median(xs), 1),
            "max": round(xs[-1], 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("memres")
    ap.add_argument("--events", type=int, default=1000000)
    ap.add_argument("--tags", type=int, default=0)
    ap.add_argument("--stacks", type=int, default=0)
    ap.add_argument("--zooms", type=int, default=20)
    ap.add_argument("--keep", help="a directory to keep the log and the page in")
    ap.add_argument("--json", help="write the figures to this file too")
    args = ap.parse_args()
    name = os.environ.get("MEMRES_CHROMIUM")
    chromium = None if name == "none" else shutil.which(name or "chromium")
    if chromium is None:
        print("view-bench: no chromium", file=sys.stderr)
        return 77
    d = args.keep or tempfile.mkdtemp(prefix="memres-view-bench-")
    os.makedirs(d, exist_ok=True)
    log, page = os.path.join(d, "big.csv"), os.path.join(d, "big.html")
    t0 = time.monotonic()
    write_log(log, args.events, args.tags, args.stacks)
    gen = time.monotonic() - t0
    t0 = time.monotonic()
    r = subprocess.run([args.memres, "view", log, "-o", page], capture_output=True, text=True)
    view_s = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit("memres view: " + r.stderr)
    out = {"events": args.events, "tags": args.tags, "stacks": args.stacks,
           "log_bytes": os.path.getsize(log),
           "generate_s": round(gen, 1), "view_s": round(view_s, 1),
           "page_bytes": os.path.getsize(page)}
    b = Browser(chromium, os.path.join(d, "profile"))
    try:
        out["open_s"] = round(b.open("file://" + page), 2)
        out["first_view_ms"] = float(b.eval(
            "document.getElementById('memres-view-status').dataset.firstViewMs"))
        out["parsed_ms"] = float(b.eval(
            "document.getElementById('memres-view-status').dataset.parsedMs || 'NaN'"))
        out["first_view_cpu_ms"] = round(b.thread_ms(), 1)
        x = b.eval("document.getElementById('memres-view-status').dataset.plot")
        pl, _, pw, _ = map(int, x.split(","))
        mid = pl + pw // 2
        zoom, pan = [], []
        for k in range(args.zooms):  # in around the middle, then out
            f = 0.5 if k < args.zooms // 2 else 2
            zoom.append(b.timed("memresZoom(%g, %d)" % (f, mid)))
            if k == args.zooms // 2 - 1 and b.eval("typeof memresPan") == "function":  # deepest: pans of a tenth of the plot each way
                for j in range(args.zooms):
                    dx = (pw // 10) * (1 if j % 4 < 2 else -1)
                    pan.append(b.timed("memresPan(%d)" % dx))
        errors = b.eval("document.getElementById('memres-view-status').dataset.errors || ''")
    finally:
        b.close()
    out["zoom_script_ms"] = summary([z[0] for z in zoom])
    out["zoom_frame_ms"] = summary([z[1] for z in zoom])
    out["zoom_cpu_ms"] = summary([z[2] for z in zoom])
    if pan:
        out["pan_script_ms"] = summary([z[0] for z in pan])
        out["pan_frame_ms"] = summary([z[1] for z in pan])
        out["pan_cpu_ms"] = summary([z[2] for z in pan])
    out["errors"] = errors
    out["zoom_raw"] = [[round(v, 1) for v in z] for z in zoom]
    out["pan_raw"] = [[round(v, 1) for v in z] for z in pan]
    print(json.dumps(out), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if not args.keep:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
