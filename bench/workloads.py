#!/usr/bin/env python3
"""Issue 38's PyTorch workloads: how much device memory an allocator holds for what the
program uses, and how fast the program runs, for torch's allocators and memres through
libmemres-allocator, in paired, interleaved rounds.

  bench/workloads.py train [--rounds 3] [--steps 60] [--seed 38] [--spec SPEC ...] [--json F]
  bench/workloads.py infer [--rounds 3] [--batches 8] [--seed 383] [--spec SPEC ...] [--json F]
  --no-torch leaves out torch's default allocator (a shorter run; torch-expandable stays)
  bench/workloads.py train|infer --trace OUT.csv   (record a `log` trace, one process)
  bench/workloads.py train --steps 4 --trace bench/traces/transformer.csv
             (the committed trace of workload 1: 4 steps keep it small; its replay test,
             /arena/replay/target, runs over every trace in bench/traces)

Workloads (fixed seeds, each workload its own: train 38, infer 383; the same draws for every
configuration):
  train  a decoder-only transformer whose shapes change every step: 6 pre-LayerNorm blocks,
         d_model 1024, 16 heads, feed-forward 4096, vocabulary 32000, bf16 autocast, AdamW;
         each step draws batch 1-16 and sequence 64-2048; `--steps` steps (default 60).
  infer  serving (issue 38's target 3): batches of 1-16 requests, prompts of 32-512 tokens,
         16-256 new tokens each; every layer's key/value cache grows by one token per
         generated token (a new tensor of the grown size each time, torch.cat, the old one
         freed) and is freed at the batch's end; the same model as train, no grad, bf16.
         Many distinct, slowly growing sizes: where size classes strand the most.

Configurations, each in a process of its own (an allocator is chosen before the first CUDA
allocation): `torch` (the default caching allocator), `torch-expandable`
(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), and `memres:SPEC` for each --spec
(default: arena:device=0, cache>dmr:device=0, dmr:device=0, cache>vmm:device=0), through
torch.cuda.memory.CUDAPluggableAllocator over libmemres-allocator with
MEMRES_ALLOCATOR_RESOURCE=stats>SPEC (the stats layer counts the bytes torch requested).

Per configuration and round:
  held       device memory the process held at its peak: cuMemGetInfo's used bytes (through
             torch.cuda.mem_get_info) sampled after every forward, backward and optimizer
             step (train) or every generated token (infer), less the used bytes before the
             first allocation;
  requested  the peak of live tensor bytes: torch.cuda.max_memory_allocated() for torch's
             allocators, the stats layer's used_high for memres;
  reserved   the allocator's own peak of reserved bytes: torch.cuda.max_memory_reserved() for
             torch's allocators, the reserved_high of the layer under the stats layer for
             memres (for `arena` its peak of physical memory mapped); held less reserved is
             what the process holds outside the allocator (context growth, kernels loaded
             lazily on first use, library handles), which no allocator controls;
  held_warm  the same peak less the used bytes after a warm-up instead: one small pass of the
             workload (one step or batch of its smallest shape, on a model of its own) run
             first, so that the kernels it loads on first use and the libraries' handles
             exist, then every cached byte given back
             (torch.cuda.empty_cache(), memres_resource_trim() through the shim) before the
             baseline is read again. What the allocator holds for the run, without the code and
             handles any allocator's process loads (--no-warmup: no warm-up, held_warm = held).
             The warm-up's peak is far below the run's, so the peaks of requested and reserved
             are the run's;
  time       the median step time (train, after 3 warm-up steps) or tokens per second (infer).
  counters   memres only: the layers' counters at the end (granules created, remapped and
             released, settles...; bench/interop.py's layer_counters()), warm-up included: a
             slow round shows whether it was driver work.
The rounds run the configurations in turn (round-robin), so that each round pairs them under
the same machine state; a configuration's time ratio to torch-expandable is the median over
the rounds of its ratio in each round, printed with the lowest and highest round.

Environment: MEMRES_ALLOCATOR_LIB, MEMRES_LIBMEMRES, MEMRES_PLUGIN_PATH as for
bench/interop.py (scripts/gpu-run --interop sets them). Exits 77 without torch or a device."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))

DEFAULT_SPECS = ["arena:device=0", "cache>dmr:device=0", "dmr:device=0", "cache>vmm:device=0"]
D_MODEL, HEADS, FFN, LAYERS, VOCAB = 1024, 16, 4096, 6, 32000


def build_model(torch):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(D_MODEL)
            self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
            self.proj = nn.Linear(D_MODEL, D_MODEL)
            self.ln2 = nn.LayerNorm(D_MODEL)
            self.ff1 = nn.Linear(D_MODEL, FFN)
            self.ff2 = nn.Linear(FFN, D_MODEL)

        def attend(self, x, cache=None):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, D_MODEL // HEADS).unbind(2)
            q, k, v = (z.transpose(1, 2) for z in (q, k, v))
            if cache is not None:
                if cache[0] is not None:
                    # the cache grows by the new tokens: a new tensor of the grown size
                    k = torch.cat([cache[0], k], dim=2)
                    v = torch.cat([cache[1], v], dim=2)
                cache[0], cache[1] = k, v
            causal = cache is None or t > 1
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal and q.shape[2] ==
                                               k.shape[2])
            return self.proj(y.transpose(1, 2).reshape(b, t, D_MODEL))

        def forward(self, x, cache=None):
            x = x + self.attend(x, cache)
            return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, D_MODEL)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln = nn.LayerNorm(D_MODEL)
            self.head = nn.Linear(D_MODEL, VOCAB, bias=False)

        def forward(self, tokens, caches=None):
            x = self.emb(tokens)
            for i, blk in enumerate(self.blocks):
                x = blk(x, None if caches is None else caches[i])
            return self.head(self.ln(x))

    return Decoder()


class Sampler:
    """Device memory held (cuMemGetInfo) at its peak, from a baseline taken before any
    allocation of the configuration."""

    def __init__(self, torch):
        self.torch = torch
        free, total = torch.cuda.mem_get_info()
        self.base = total - free
        self.base_warm = self.base
        self.peak = 0

    def sample(self):
        free, total = self.torch.cuda.mem_get_info()
        self.peak = max(self.peak, total - free - self.base)

    def rebase(self):
        """The baseline after the warm-up: held_warm is the peak less it."""
        free, total = self.torch.cuda.mem_get_info()
        self.base_warm = total - free

    def held_warm(self):
        return self.peak + self.base - self.base_warm


class _Smallest:
    """The warm-up's draws: the smallest of every range (one batch of the smallest shape)."""

    def randint(self, a, b):
        return a


class _NoSampler:
    def sample(self):
        pass


def warm_up(torch, args, alloc):
    """One small pass of the workload itself (run_train()'s or run_infer()'s, one step or batch
    of the smallest shape, on a model of its own: its kernels loaded, cuBLAS's handles made),
    then every cached byte given back."""
    run = run_train if args.workload == "train" else run_infer
    run(torch, argparse.Namespace(steps=1, batches=1), _NoSampler(), _Smallest())
    torch.cuda.synchronize()
    if alloc is not None:
        alloc.empty_cache()
    else:
        torch.cuda.empty_cache()


def run_train(torch, args, sampler, rng):
    dev = torch.device("cuda", 0)
    model = build_model(torch).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for step in range(args.steps):
        batch, seq = rng.randint(1, 16), rng.randint(64, 2048)
        tokens = torch.randint(0, VOCAB, (batch, seq + 1), device=dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.float().view(-1, VOCAB),
                                                     tokens[:, 1:].reshape(-1))
        sampler.sample()
        loss.backward()
        sampler.sample()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        sampler.sample()
        del tokens, logits, loss
    return {"step_s": statistics.median(times[3:] if len(times) > 3 else times)}


def run_infer(torch, args, sampler, rng):
    dev = torch.device("cuda", 0)
    model = build_model(torch).to(dev).to(torch.bfloat16).eval()
    tokens_done = 0
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.no_grad():
        for _ in range(args.batches):
            batch, prompt, new = rng.randint(1, 16), rng.randint(32, 512), rng.randint(16, 256)
            caches = [[None, None] for _ in range(LAYERS)]
            tokens = torch.randint(0, VOCAB, (batch, prompt), device=dev)
            logits = model(tokens, caches)
            for _ in range(new):
                nxt = logits[:, -1:].argmax(-1)
                logits = model(nxt, caches)
                tokens_done += batch
                sampler.sample()
            del caches, tokens, logits, nxt
    torch.cuda.synchronize()
    return {"tokens_per_s": tokens_done / (time.perf_counter() - t0)}


def worker(config, args):
    """One configuration in this process: prints one JSON line."""
    if config == "torch-expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import random

    import torch
    if not torch.cuda.is_available():
        return 77
    memres = alloc = mr = None
    if config.startswith("memres:"):
        # before torch.cuda.init(): an initialized allocator cannot be swapped
        os.environ["MEMRES_ALLOCATOR_RESOURCE"] = "stats>" + config[len("memres:"):]
        from memres_interop import Allocator, Memres
        alloc, memres = Allocator(), Memres()
        torch.cuda.memory.change_current_allocator(torch.cuda.memory.CUDAPluggableAllocator(
            alloc.path, "memres_torch_alloc", "memres_torch_free"))
    torch.cuda.init()
    sampler = Sampler(torch)
    if not args.no_warmup:
        warm_up(torch, args, alloc)
        sampler.rebase()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    run = run_train if args.workload == "train" else run_infer
    out = run(torch, args, sampler, rng)
    torch.cuda.synchronize()
    sampler.sample()
    if alloc is not None:
        import ctypes
        top = alloc.resource(0)
        requested = memres.stats(top)["used_high"]
        memres.lib.memres_resource_get_upstream.restype = ctypes.c_void_p
        memres.lib.memres_resource_get_upstream.argtypes = [ctypes.c_void_p]
        below = memres.lib.memres_resource_get_upstream(top)
        reserved = memres.stats(below)["reserved_high"] if below else None
        from interop import layer_counters  # bench/interop.py, beside this file
        out["counters"] = layer_counters(alloc)
    else:
        requested = torch.cuda.max_memory_allocated()
        reserved = torch.cuda.max_memory_reserved()
    out.update(config=config, held=sampler.peak, held_warm=sampler.held_warm(),
               requested=requested, reserved=reserved)
    print(json.dumps(out), flush=True)
    return 0


def record_trace(args):
    """One process: the workload through `log:path=OUT>arena:device=0`, for memres replay."""
    path = os.path.abspath(args.trace)
    escaped = path.replace("\\", "\\\\").replace(",", "\\,").replace(">", "\\>")
    cfg = "memres:log:path=" + escaped + ",flush=true>arena:device=0"
    args.no_warmup = True  # the trace holds the workload alone
    rc = worker(cfg, args)
    if rc == 0:
        print(f"workloads: trace of {args.workload} written to {path}", file=sys.stderr)
    return rc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=["train", "infer"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--seed", type=int, default=None,
                    help="the draws' seed (default: train 38, infer 383)")
    ap.add_argument("--spec", action="append")
    ap.add_argument("--no-torch", action="store_true",
                    help="leave out torch's default allocator (torch-expandable, the reference "
                         "of the time ratios, always runs)")
    ap.add_argument("--no-warmup", action="store_true",
                    help="no warm-up pass before the baseline (held_warm is then held)")
    ap.add_argument("--json")
    ap.add_argument("--trace")
    ap.add_argument("--worker")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = 38 if args.workload == "train" else 383
    if args.worker:
        return worker(args.worker, args)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("workloads: no torch", file=sys.stderr)
        return 77
    if args.trace:
        return record_trace(args)
    configs = ([] if args.no_torch else ["torch"]) + ["torch-expandable"] + [
        "memres:" + s for s in args.spec or DEFAULT_SPECS]
    results = {c: [] for c in configs}
    for r in range(args.rounds):
        for c in configs:
            cmd = [sys.executable, os.path.abspath(__file__), args.workload, "--worker", c,
                   "--steps", str(args.steps), "--batches", str(args.batches),
                   "--seed", str(args.seed)] + (["--no-warmup"] if args.no_warmup else [])
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode == 77:
                print("workloads: no CUDA device", file=sys.stderr)
                return 77
            if p.returncode != 0:
                print(f"workloads: {c} failed (round {r + 1}):\n{p.stderr[-3000:]}",
                      file=sys.stderr)
                results[c].append(None)
                continue
            results[c].append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1} {c}: {results[c][-1]}", file=sys.stderr)
    timing = "step_s" if args.workload == "train" else "tokens_per_s"
    ref = results["torch-expandable"]
    print(f"| {args.workload} | held GiB | requested GiB | held / requested | "
          f"held after warm-up / requested | allocator reserved / requested | "
          f"{timing} (median) | time vs torch-expandable: median [low, high] |")
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for c in configs:
        runs = [x for x in results[c] if x is not None]
        if not runs:
            print(f"| {c} | failed | | | | | | |")
            continue
        held = max(x["held"] for x in runs)
        held_warm = max(x.get("held_warm", x["held"]) for x in runs)
        req = max(x["requested"] for x in runs)
        rsv = [x["reserved"] for x in runs if x.get("reserved")]
        rsv_ratio = f"{max(rsv) / req:.3f}" if rsv else "-"
        t = statistics.median(x[timing] for x in runs)
        # time ratio per round: step time over torch-expandable's (train), or its tokens per
        # second over ours (infer): above 1 is slower in both
        ratios = []
        for x, y in zip(results[c], ref):
            if x is not None and y is not None:
                ratios.append(x[timing] / y[timing] if timing == "step_s"
                              else y[timing] / x[timing])
        rt = (f"{statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]"
              if ratios else "-")
        print(f"| {c} | {held / 2**30:.2f} | {req / 2**30:.2f} | {held / req:.3f} | "
              f"{held_warm / req:.3f} | {rsv_ratio} | {t:.4g} | {rt} |")
        summary[c] = {"held": held, "held_warm": held_warm, "requested": req, "reserved": max(rsv) if rsv else None,
                      timing: t, "time_ratios": ratios,
                      "rounds": results[c]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"workload": args.workload, "seed": args.seed, "configs": summary}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
