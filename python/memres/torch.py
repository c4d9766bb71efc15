"""memres as PyTorch's CUDA allocator (see memres.torch.use)."""
