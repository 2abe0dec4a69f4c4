#!/usr/bin/env python3
"""The PyTorch side of `bench_gpu` (crates/tgc-cli/examples/bench_gpu.rs).

Usage: bench_torch.py DTYPE M N K EPILOGUE ITERS
  DTYPE     f16 or bf16
  EPILOGUE  none: torch.matmul (cuBLAS); bias_relu: torch.relu(x @ w + b),
            unfused (the matmul, then the add, then the ReLU)
Prints one line: `seconds_per_iteration` measured with CUDA events over
ITERS iterations after a warm-up. Exits 3 with a message on stderr when
torch or a GPU is missing.
"""
import sys


def main():
    dtype_name, m, n, k, epilogue, iters = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5], int(sys.argv[6])
    try:
        import torch
    except ImportError as e:
        print(f"torch is not installed: {e}", file=sys.stderr)
        sys.exit(3)
    if not torch.cuda.is_available():
        print("torch sees no CUDA device", file=sys.stderr)
        sys.exit(3)
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
    dev = torch.device("cuda")
    x = torch.randn(m, k, device=dev, dtype=dtype)
    w = torch.randn(k, n, device=dev, dtype=dtype)
    b = torch.randn(n, device=dev, dtype=dtype)
    if epilogue == "none":
        step = lambda: torch.matmul(x, w)
    elif epilogue == "bias_relu":
        step = lambda: torch.relu(torch.matmul(x, w) + b)
    else:
        print(f"unknown epilogue {epilogue}", file=sys.stderr)
        sys.exit(2)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        step()
    end.record()
    torch.cuda.synchronize()
    print(start.elapsed_time(end) / 1000.0 / iters)


if __name__ == "__main__":
    main()
