"""PyTorch with memres as its allocator through the package (memres.torch.use(), moved from the
ctypes suite's tests/python/test_torch_allocator.py): a few training steps of a resnet18
(torchvision's when importable, else the small residual net below) and of a transformer encoder
layer on random data give the results torch's own allocator gives in a subprocess with the same
seeds (torch.testing.assert_close); memres's statistics show the allocations while the models
live; a failed allocation raises with memres's message and the context stays usable; nothing is
left allocated after empty_cache.

Run by test_frameworks.py in a fresh interpreter on the GPU (an allocator is installed once per
process). Exits 77 (skipped) without torch or a CUDA device."""

import gc
import os
import subprocess
import sys
import tempfile

# deterministic cuBLAS, set before torch loads it (both processes)
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

try:
    import torch
except ImportError:
    print("torch is not importable")
    sys.exit(77)


def small_resnet(nn, num_classes=10):
    """A resnet18-like network: a stem, residual basic blocks at 4 widths, pooling, a linear
    head (used when torchvision is not importable)."""

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes)]
    return nn.Sequential(*layers)


def make_resnet():
    try:
        import torchvision
        return torchvision.models.resnet18(num_classes=10), "torchvision resnet18"
    except ImportError:
        return small_resnet(torch.nn), "inline resnet18-like net"


def workload(steps=3):
    """The same computation in both processes: seeded initialization and data, SGD steps."""
    torch.manual_seed(1234)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    dev = torch.device("cuda", 0)
    out = {}

    model, name = make_resnet()
    model = model.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(16, 3, 64, 64, device=dev)
    y = torch.randint(0, 10, (16,), device=dev)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    out["resnet_losses"] = torch.stack(losses)
    out["resnet_state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}

    enc = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256,
                                           dropout=0.0, batch_first=True).to(dev)
    opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
    src = torch.randn(8, 32, 128, device=dev)
    target = torch.randn(8, 32, 128, device=dev)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(enc(src), target)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    out["encoder_losses"] = torch.stack(losses)
    with torch.no_grad():
        out["encoder_out"] = enc(src)
    out["encoder_state"] = {k: v.detach().clone() for k, v in enc.state_dict().items()}
    torch.cuda.synchronize()
    return out, name, (model, enc, opt)


def to_cpu(tree):
    if isinstance(tree, dict):
        return {k: to_cpu(v) for k, v in tree.items()}
    return tree.cpu()


def reference_main(path):
    out, _, _ = workload()
    torch.save(to_cpu(out), path)


def main():
    import memres
    import memres.torch

    if not torch.cuda.is_available():
        print("torch sees no CUDA device")
        sys.exit(77)

    # torch's own allocator, in a process of its own, same seeds
    with tempfile.TemporaryDirectory() as tmp:
        ref_path = os.path.join(tmp, "reference.pt")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--reference", ref_path],
                       check=True)
        reference = torch.load(ref_path)

    # memres, before anything allocates on the device (use() refuses a build without C++)
    alloc = memres.torch.use()  # cache>dmr:device={device}
    out, name, keep = workload()
    mr = alloc.resource(0)
    assert mr is not None and mr.kind == "cache", mr
    live = alloc.count_buffers(0)
    stats = alloc.stats(0)
    print(f"{name}: memres holds {live} allocations for torch; stats {stats}")
    assert live > 10, live
    assert stats["n_buffers"] >= live and stats["used_current"] > 0, stats
    assert stats["used_high"] >= stats["used_current"], stats

    got = to_cpu(out)
    for key in reference:
        torch.testing.assert_close(got[key], reference[key], rtol=1e-4, atol=1e-5,
                                   msg=lambda m, k=key: f"{k}: {m}")
    print("results equal to torch's own allocator:", ", ".join(sorted(reference)))

    # a failing allocation (more than any device has): torch does not check the pointer its
    # pluggable allocator returns, so memres_torch_alloc throws a C++ exception carrying the
    # GError's message, which torch raises as RuntimeError; the context must stay usable
    before = alloc.count_buffers(-1)
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
    except (RuntimeError, MemoryError) as e:  # torch.OutOfMemoryError is a RuntimeError
        print(f"1 PiB: torch raised {type(e).__name__}: {e}")
        assert "memres allocator" in str(e), str(e)
    else:
        raise AssertionError("torch did not raise for a failed allocation of 1 PiB")
    assert alloc.count_buffers(-1) == before
    torch.cuda.synchronize()
    x = torch.arange(4096, dtype=torch.float32, device="cuda")
    total = (x * 2).sum().item()
    torch.cuda.synchronize()
    assert total == 2 * 4095 * 4096 / 2, total
    print("context usable after the failure: a kernel ran, synchronize succeeded")

    # everything gone: the models, the optimizer state, cuBLAS's workspaces, the cache
    del out, keep, got, x
    gc.collect()
    torch.cuda.synchronize()
    if hasattr(torch._C, "_cuda_clearCublasWorkspaces"):
        torch._C._cuda_clearCublasWorkspaces()
    torch.cuda.empty_cache()
    alloc.empty_cache()
    torch.cuda.synchronize()
    stats = mr.stats()
    print(f"after empty_cache: {alloc.count_buffers(-1)} allocations; stats {stats}")
    assert alloc.count_buffers(-1) == 0, alloc.count_buffers(-1)
    assert stats["n_buffers"] == 0 and stats["used_current"] == 0, stats
    print("ok")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--reference":
        reference_main(sys.argv[2])
    else:
        main()
