"""Sleep and wake in a PyTorch process, end to end (docs/sleep.md, issue 34): a model's weights
and a KV-like cache allocated under two tags through memres's allocator (cache>vmm), both put to
sleep (the cache discarded, the weights backed up in page-locked memory), the memory given back
used by another allocation, both woken, and the model's output compared before and after.

    python3 bench/sleep-torch-demo.py [--hidden 8192] [--layers 8] [--kv-gib 8]

Needs a GPU, torch, and the memres package (PYTHONPATH=build/python or an installed wheel;
MEMRES_ALLOCATOR_LIB for an uninstalled build). Prints one JSON object; exits 1 when the output
differs or an address moved."""
import argparse
import json
import sys
import time

import memres
import memres.torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--kv-gib", type=float, default=8.0)
    args = ap.parse_args()

    alloc = memres.torch.use("cache>vmm:device={device}")
    import torch

    torch.manual_seed(34)
    with memres.tag("demo-weights"):
        layers = []
        for _ in range(args.layers):
            layers += [torch.nn.Linear(args.hidden, args.hidden), torch.nn.GELU()]
        model = torch.nn.Sequential(*layers).cuda().half()
    with memres.tag("demo-kv"):
        kv = torch.empty(int(args.kv_gib * (1 << 30)) // 2, dtype=torch.float16, device="cuda")
        kv.normal_()
    x = torch.randn(16, args.hidden, device="cuda", dtype=torch.float16)
    with torch.no_grad():
        before = model(x)
    torch.cuda.synchronize()
    addresses = [p.data_ptr() for p in model.parameters()] + [kv.data_ptr()]

    mr = alloc.resource(0)
    free0 = torch.cuda.mem_get_info()[0]
    t0 = time.perf_counter()
    mr.sleep("demo-kv")  # discard
    mr.sleep("demo-weights", mode="backup")
    t_sleep = time.perf_counter() - t0
    free1 = torch.cuda.mem_get_info()[0]
    given = free1 - free0

    # the memory given back, used by someone else (untagged, the same allocator)
    other = torch.empty(int(given * 0.9) // 4, dtype=torch.float32, device="cuda")
    other.fill_(1.0)
    torch.cuda.synchronize()
    del other
    torch.cuda.empty_cache()  # memres_torch_empty_cache: the cache's free blocks back to vmm

    t0 = time.perf_counter()
    mr.wake("demo-weights")
    mr.wake("demo-kv")
    t_wake = time.perf_counter() - t0
    with torch.no_grad():
        after = model(x)
    torch.cuda.synchronize()
    same_addresses = addresses == [p.data_ptr() for p in model.parameters()] + [kv.data_ptr()]
    identical = bool(torch.equal(before, after))
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    print(json.dumps({
        "weights_bytes": weight_bytes,
        "kv_bytes": kv.numel() * kv.element_size(),
        "given_back_bytes": given,
        "given_back_share": given / max(1, weight_bytes + kv.numel() * kv.element_size()),
        "sleep_s": round(t_sleep, 4),
        "wake_s": round(t_wake, 4),
        "addresses_identical": same_addresses,
        "output_identical": identical,
    }))
    return 0 if identical and same_addresses else 1


if __name__ == "__main__":
    sys.exit(main())
