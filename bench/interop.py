#!/usr/bin/env python3
"""PyTorch with memres as its allocator against torch's own caching allocator, in one run.

  bench/interop.py [--quick] [--reps N] [--json FILE] [--torch-conf CONF]

torch's allocator can only be chosen before the first CUDA allocation of a process, so the
script starts two workers, one per allocator (libmemres-allocator through
torch.cuda.memory.CUDAPluggableAllocator, resource from MEMRES_ALLOCATOR_RESOURCE or the
library's default), and asks them in turn, repetition by repetition, to time:
  resnet18-step  one training step (forward, backward, SGD) of torchvision's resnet18 (or the
                 inline resnet18-like net of tests/python) on a batch of 32 3x224x224 images
  resnet18-gpu   the same steps' time on the device: CUDA events recorded on the current
                 stream before and after each step (the kernels and the gaps between them)
  resnet18-host  the same steps' host time: until step() returns, before the synchronize (the
                 launches and the allocator's calls; above resnet18-gpu the step waits for them)
                 (--json also keeps every step's time, and for memres what each step made the
                 resource do: its layers' counters, granules created and remapped, settles...)
  resnet18-kernels  with --kernels: the sum of the step's kernel and copy times on the device
                 (torch.profiler, 5 steps a repetition); resnet18-gpu above it is the time the
                 device waited between them
  empty-del      torch.empty(n, device="cuda") then del, n cycling 1 KiB .. 16 MiB (per pair)
--torch-conf CONF adds a third worker, torch's allocator under PYTORCH_CUDA_ALLOC_CONF=CONF
(expandable_segments:True, say), reported against torch's default the same way; each --also SPEC
one more memres worker on resource SPEC (two memres configurations compared in the same rounds).
Each repetition gives a median per worker; the memres/torch ratio is the median over the
repetitions of memres's median over torch's in the same repetition (paired), with its
quartiles. Prints a Markdown table for bench/RESULTS.md.

Environment: MEMRES_ALLOCATOR_LIB, MEMRES_LIBMEMRES, MEMRES_PLUGIN_PATH (scripts/gpu-run
--interop sets them). Exits 77 without torch or a CUDA device."""

import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python", "package", "frameworks"))

SIZES = [1 << 10, 1 << 16, 1 << 20, 1 << 24]


COUNTED = ("granules_created", "granules_remapped", "granules_released", "settles", "misses",
           "park_hits", "park_flushes", "hits")


@functools.cache
def _counter_libs():
    """libmemres and GLib with the prototypes layer_counters() calls, set up once."""
    import ctypes
    libm = ctypes.CDLL(os.environ.get("MEMRES_LIBMEMRES") or "libmemres.so")
    glib = ctypes.CDLL("libglib-2.0.so.0")
    for name, res, args in (("memres_resource_get_counters", ctypes.c_void_p, [ctypes.c_void_p] * 2),
                            ("memres_resource_get_upstream", ctypes.c_void_p, [ctypes.c_void_p])):
        getattr(libm, name).restype = res
        getattr(libm, name).argtypes = args
    glib.g_variant_print.restype = ctypes.c_void_p
    glib.g_variant_print.argtypes = [ctypes.c_void_p, ctypes.c_int]
    glib.g_variant_unref.argtypes = [ctypes.c_void_p]
    glib.g_free.argtypes = [ctypes.c_void_p]
    return libm, glib


def layer_counters(alloc, names=COUNTED):
    """The counters of every layer of the shim's device-0 resource (memres_resource_get_counters()
    down the stack: no snapshot, which would flush what an arena parked), summed by name over
    the layers, the ones in @names only."""
    import ctypes
    libm, glib = _counter_libs()
    out = {}
    mr = alloc.resource(0)
    while mr:
        v = libm.memres_resource_get_counters(mr, None)
        if v:
            text = glib.g_variant_print(v, 1)
            for name, value in re.findall(r"'(\w+)': <(?:uint64 |uint32 )?(\d+)>",
                                          ctypes.string_at(text).decode()):
                if name in names:
                    out[name] = out.get(name, 0) + int(value)
            glib.g_free(text)
            glib.g_variant_unref(v)
        mr = libm.memres_resource_get_upstream(mr)
    return out


def worker(kind, quick):
    import torch
    alloc = None
    if kind == "memres":
        from memres_interop import Allocator
        alloc = Allocator()
        torch.cuda.memory.change_current_allocator(torch.cuda.memory.CUDAPluggableAllocator(
            alloc.path, "memres_torch_alloc", "memres_torch_free"))
    from torch_training import make_resnet

    dev = torch.device("cuda", 0)
    free0, total = torch.cuda.mem_get_info(0)  # the context made: the baseline of held()
    torch.backends.cudnn.benchmark = False
    model, name = make_resnet()
    model = model.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batch, side = (8, 64) if quick else (32, 224)
    x = torch.randn(batch, 3, side, side, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def resnet(n):
        times, gpu, host, counts = [], [], [], []
        before = layer_counters(alloc) if alloc else {}
        for _ in range(n):
            torch.cuda.synchronize()
            t = time.perf_counter()
            start.record()
            step()
            end.record()
            host.append(time.perf_counter() - t)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
            gpu.append(start.elapsed_time(end))
            if alloc:  # what the step made the resource do (outside the timed part)
                now = layer_counters(alloc)
                counts.append({k: v - before.get(k, 0) for k, v in now.items()
                               if v != before.get(k, 0)})
                before = now
        return (statistics.median(times) * 1e3, statistics.median(gpu),
                statistics.median(host) * 1e3, [x * 1e3 for x in times], counts)  # ms

    def held(n):
        """Device memory the process holds after @n more steps over its baseline (cuMemGetInfo),
        bytes: the allocator's memory, with the libraries' workspaces (the same for both)."""
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        return free0 - torch.cuda.mem_get_info(0)[0]

    def kernels(n):
        from torch.profiler import profile, ProfilerActivity
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                step()
            torch.cuda.synchronize()
        return sum(e.self_device_time_total for e in prof.key_averages()) / n / 1e3  # ms

    def empty_del(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for i in range(n):
            a = torch.empty(SIZES[i % len(SIZES)], dtype=torch.uint8, device=dev)
            del a
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / n * 1e6  # us

    for _ in range(3):  # warm-up: cuDNN plans, the pool's first growth
        step()
    empty_del(200)
    print(json.dumps({"ready": name}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["what"] == "resnet18-step":
            value, gpu, host, steps, counts = resnet(req["n"])
            print(json.dumps({"value": value, "gpu": gpu, "host": host, "steps": steps,
                              "counts": counts}), flush=True)
        elif req["what"] == "resnet18-held":
            print(json.dumps({"value": held(req["n"])}), flush=True)
        elif req["what"] == "resnet18-kernels":
            print(json.dumps({"value": kernels(req["n"])}), flush=True)
        else:
            print(json.dumps({"value": empty_del(req["n"])}), flush=True)


class Worker:
    def __init__(self, kind, quick, conf=None, spec=None):
        args = [sys.executable, os.path.abspath(__file__), "--worker",
                "memres" if kind.startswith("memres") else "torch"]
        if quick:
            args.append("--quick")
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        if spec:
            env["MEMRES_ALLOCATOR_RESOURCE"] = spec
        self.kind = kind
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=env)
        self.model = self.read()["ready"]

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.kind} worker exited ({self.p.wait()})")
        return json.loads(line)

    def ask(self, what, n):
        self.p.stdin.write(json.dumps({"what": what, "n": n}) + "\n")
        self.p.stdin.flush()
        return self.read()

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def default_spec():
    """MEMRES_ALLOCATOR_DEFAULT_SPEC, read from the header next to this script."""
    header = os.path.join(HERE, "..", "interop", "memres-allocator.h")
    try:
        with open(header) as f:
            for line in f:
                if line.startswith("#define MEMRES_ALLOCATOR_DEFAULT_SPEC"):
                    return line.split('"')[1] + " (the library's default)"
    except (OSError, IndexError):
        pass
    return "the library's default"


def quartiles(values):
    if len(values) < 2:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], statistics.median(values), q[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--json")
    ap.add_argument("--worker")
    ap.add_argument("--only", choices=["resnet18-step", "empty-del"],
                    help="one workload only (the other's phases then never come between the "
                    "repetitions of this one)")
    ap.add_argument("--kernels", action="store_true",
                    help="the steps' kernel times under torch.profiler too")
    ap.add_argument("--memory", action="store_true",
                    help="only the device memory each worker holds after 20 resnet18 steps, one "
                    "worker at a time (each alone on the device: cuMemGetInfo over its baseline)")
    ap.add_argument("--torch-conf", help="a third worker: torch's allocator under "
                    "PYTORCH_CUDA_ALLOC_CONF=TORCH_CONF")
    ap.add_argument("--also", action="append", default=[], metavar="SPEC",
                    help="one more memres worker (memres2, memres3, ...) on resource SPEC, in the "
                    "same rounds and paired with torch the same way (repeatable; not with "
                    "--memory)")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.quick)
        return
    try:
        import torch
    except ImportError:
        print("SKIP: torch is not importable")
        sys.exit(77)
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        sys.exit(77)
    reps = args.reps or (3 if args.quick else 7)
    plan = {"resnet18-step": (3 if args.quick else 10, "ms/step"),
            "empty-del": (500 if args.quick else 20000, "us/pair")}
    if args.only:
        plan = {args.only: plan[args.only]}
    if args.kernels and "resnet18-step" in plan:
        plan["resnet18-kernels"] = (5, "ms/step (kernels)")
    units = {"resnet18-step": "ms/step", "resnet18-gpu": "ms/step (device)",
             "resnet18-host": "ms/step (host)", "empty-del": "us/pair"}
    if args.only == "empty-del":
        units = {"empty-del": "us/pair"}
    elif args.only:
        del units["empty-del"]
    if "resnet18-kernels" in plan:
        units["resnet18-kernels"] = "ms/step (kernels)"
    spec = os.environ.get("MEMRES_ALLOCATOR_RESOURCE") or default_spec()
    kinds = ["torch", "memres"]
    if args.torch_conf:
        kinds.append("torch-conf")
    also = {f"memres{i + 2}": s for i, s in enumerate(args.also)}
    if also and args.memory:
        ap.error("--also is not for --memory")
    kinds += list(also)
    if args.memory:
        held = {}
        for k in kinds:  # one at a time: each alone on the device
            w = Worker(k, args.quick, args.torch_conf if k == "torch-conf" else None)
            held[k] = w.ask("resnet18-held", 20)["value"]
            w.close()
        print(f"\n### resnet18: device memory held after 20 steps ({torch.cuda.get_device_name(0)})\n")
        print(f"memres resource: `{spec}`\n")
        for k in kinds:
            print(f"- {k}: {held[k] / 2**20:.1f} MiB ({held[k] / held['torch']:.3f}x torch's)")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"spec": spec, "torch_conf": args.torch_conf, "held": held}, f, indent=1)
        return
    steps = {w: [] for w in kinds}  # each repetition's step times, in order
    counts = []  # the memres worker's counters, per step of each repetition
    workers = {k: Worker(k, args.quick, args.torch_conf if k == "torch-conf" else None,
                         also.get(k)) for k in kinds}
    results = {w: {k: [] for k in units} for w in workers}
    for rep in range(reps):
        order = kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]  # each goes first in turn
        for what, (n, _) in plan.items():
            for k in order:
                answer = workers[k].ask(what, n)
                results[k][what].append(answer["value"])
                if "gpu" in answer:
                    results[k]["resnet18-gpu"].append(answer["gpu"])
                    results[k]["resnet18-host"].append(answer["host"])
                    steps[k].append(answer["steps"])
                    if k == "memres":
                        counts.append(answer["counts"])
    for w in workers.values():
        w.close()

    gpu = torch.cuda.get_device_name(0)
    rows = []
    print(f"\n### PyTorch: memres as the allocator vs torch's caching allocator ({gpu})\n")
    print(f"memres resource: `{spec}`; model: {workers['torch'].model}; {reps} paired "
          "repetitions, each worker going first in turn.\n")
    others = [k for k in kinds if k != "torch"]
    names = {"memres": "memres", "torch-conf": f"torch `{args.torch_conf}`"}
    names.update({k: f"memres `{s}`" for k, s in also.items()})
    print("| workload | torch | " + " | ".join(
        f"{names[k]} | {names[k]}/torch (paired median, q1-q3)" for k in others) + " |")
    print("| --- | ---: |" + " ---: | ---: |" * len(others))
    for what, unit in units.items():
        t = statistics.median(results["torch"][what])
        row = {"workload": what, "unit": unit, "torch": t,
               "raw": {k: results[k][what] for k in results}}
        cells = []
        for k in others:
            m = statistics.median(results[k][what])
            ratios = [a / b for a, b in zip(results[k][what], results["torch"][what])]
            q1, med, q3 = quartiles(ratios)
            key = {"memres": "memres", "torch-conf": "torch_conf"}.get(k, k)
            row.update({key: m, f"{key}_ratio": med, f"{key}_ratio_q1": q1,
                        f"{key}_ratio_q3": q3})
            if k == "memres":
                row.update({"ratio": med, "ratio_q1": q1, "ratio_q3": q3})
            cells.append(f"{m:.3f} {unit} | {med:.3f} ({q1:.3f}-{q3:.3f})")
        rows.append(row)
        print(f"| {what} | {t:.3f} {unit} | " + " | ".join(cells) + " |")
    print("\nA ratio below 1 means memres is faster.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": gpu, "spec": spec, "torch_conf": args.torch_conf, "also": also,
                       "reps": reps,
                       "only": args.only, "rows": rows, "steps": steps, "counts": counts}, f,
                      indent=1)


if __name__ == "__main__":
    main()
