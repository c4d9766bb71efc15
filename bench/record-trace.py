#!/usr/bin/env python3
"""Records a `log` trace of PyTorch training resnet18 with memres as its allocator.

  bench/record-trace.py OUT.csv [--steps N] [--batch B] [--side S]

Runs N training steps (forward, backward, SGD with momentum) of torchvision's resnet18 (or the
inline resnet18-like net of tests/python when torchvision is absent) on random data, with
torch.cuda.memory.CUDAPluggableAllocator over libmemres-allocator and the resource
`log:path=OUT.csv,flush=true>cache>dmr:device=0`, so that every allocation and free torch makes is one CSV
line (RMM's columns) for `memres replay OUT.csv SPEC`. torch's own caching allocator is
replaced as a whole: the trace is what torch asks of its allocator, not what reaches the driver.
Ends with torch.cuda.empty_cache(), so that the trace frees everything it allocated.

Environment: MEMRES_ALLOCATOR_LIB, MEMRES_LIBMEMRES, MEMRES_PLUGIN_PATH as for bench/interop.py.
Exits 77 without torch or a CUDA device."""

import argparse
import gc
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python", "package", "frameworks"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--side", type=int, default=224)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("record-trace: no torch", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("record-trace: no CUDA device", file=sys.stderr)
        return 77
    path = os.path.abspath(args.out)
    # the log adaptor's option grammar: ',', '>' and '\' in a value are escaped with '\'
    escaped = path.replace("\\", "\\\\").replace(",", "\\,").replace(">", "\\>")
    os.environ["MEMRES_ALLOCATOR_RESOURCE"] = f"log:path={escaped},flush=true>cache>dmr:device=0"
    from memres_interop import Allocator

    alloc = Allocator()
    torch.cuda.memory.change_current_allocator(
        torch.cuda.memory.CUDAPluggableAllocator(alloc.path, "memres_torch_alloc",
                                                 "memres_torch_free"))
    from torch_training import make_resnet

    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    model, name = make_resnet()
    model = model.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(args.batch, 3, args.side, args.side, device=dev)
    y = torch.randint(0, 10, (args.batch,), device=dev)
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    torch.cuda.synchronize()
    del model, opt, x, y
    gc.collect()
    torch.cuda.empty_cache()
    left = alloc.count_buffers(0)
    print(f"record-trace: {name}, {args.steps} steps, batch {args.batch}x3x{args.side}x"
          f"{args.side}: {path} ({left} buffers left open)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
