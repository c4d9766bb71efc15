#!/usr/bin/env python3
"""PyTorch with memres as its allocator against torch's own caching allocator, in one run.

  bench/interop.py [--quick] [--reps N] [--json FILE]

torch's allocator can only be chosen before the first CUDA allocation of a process, so the
script starts two workers, one per allocator (libmemres-allocator through
torch.cuda.memory.CUDAPluggableAllocator, resource from MEMRES_ALLOCATOR_RESOURCE or the
library's default), and asks them in turn, repetition by repetition, to time:
  resnet18-step  one training step (forward, backward, SGD) of torchvision's resnet18 (or the
                 inline resnet18-like net of tests/python) on a batch of 32 3x224x224 images
  empty-del      torch.empty(n, device="cuda") then del, n cycling 1 KiB .. 16 MiB (per pair)
Each repetition gives a median per worker; the memres/torch ratio is the median over the
repetitions of memres's median over torch's in the same repetition (paired), with its
quartiles. Prints a Markdown table for bench/RESULTS.md.

Environment: MEMRES_ALLOCATOR_LIB, MEMRES_LIBMEMRES, MEMRES_PLUGIN_PATH (scripts/gpu-run
--interop sets them). Exits 77 without torch or a CUDA device."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python", "package", "frameworks"))

SIZES = [1 << 10, 1 << 16, 1 << 20, 1 << 24]


def worker(kind, quick):
    import torch
    if kind == "memres":
        from memres_interop import Allocator
        alloc = Allocator()
        torch.cuda.memory.change_current_allocator(torch.cuda.memory.CUDAPluggableAllocator(
            alloc.path, "memres_torch_alloc", "memres_torch_free"))
    from torch_training import make_resnet

    dev = torch.device("cuda", 0)
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

    def resnet(n):
        times = []
        for _ in range(n):
            torch.cuda.synchronize()
            t = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1e3  # ms

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
            value = resnet(req["n"])
        else:
            value = empty_del(req["n"])
        print(json.dumps({"value": value}), flush=True)


class Worker:
    def __init__(self, kind, quick):
        args = [sys.executable, os.path.abspath(__file__), "--worker", kind]
        if quick:
            args.append("--quick")
        self.kind = kind
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.model = self.read()["ready"]

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.kind} worker exited ({self.p.wait()})")
        return json.loads(line)

    def ask(self, what, n):
        self.p.stdin.write(json.dumps({"what": what, "n": n}) + "\n")
        self.p.stdin.flush()
        return self.read()["value"]

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
    spec = os.environ.get("MEMRES_ALLOCATOR_RESOURCE") or default_spec()
    workers = {k: Worker(k, args.quick) for k in ("torch", "memres")}
    results = {w: {k: [] for k in plan} for w in workers}
    for rep in range(reps):
        order = ("torch", "memres") if rep % 2 == 0 else ("memres", "torch")
        for what, (n, _) in plan.items():
            for k in order:
                results[k][what].append(workers[k].ask(what, n))
    for w in workers.values():
        w.close()

    gpu = torch.cuda.get_device_name(0)
    rows = []
    print(f"\n### PyTorch: memres as the allocator vs torch's caching allocator ({gpu})\n")
    print(f"memres resource: `{spec}`; model: {workers['torch'].model}; {reps} paired "
          "repetitions, alternating which worker goes first.\n")
    print("| workload | torch | memres | memres/torch (paired median, q1-q3) |")
    print("| --- | ---: | ---: | ---: |")
    for what, (_, unit) in plan.items():
        t = statistics.median(results["torch"][what])
        m = statistics.median(results["memres"][what])
        ratios = [a / b for a, b in zip(results["memres"][what], results["torch"][what])]
        q1, med, q3 = quartiles(ratios)
        rows.append({"workload": what, "unit": unit, "torch": t, "memres": m, "ratio": med,
                     "ratio_q1": q1, "ratio_q3": q3, "raw": {k: results[k][what] for k in results}})
        print(f"| {what} | {t:.3f} {unit} | {m:.3f} {unit} | {med:.3f} ({q1:.3f}-{q3:.3f}) |")
    print("\nA ratio below 1 means memres is faster.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": gpu, "spec": spec, "reps": reps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
