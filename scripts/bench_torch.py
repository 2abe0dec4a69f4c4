#!/usr/bin/env python3
"""The PyTorch side of `bench_gpu` (crates/tgc-cli/examples/bench_gpu.rs).

Usage: bench_torch.py DTYPE OP A B C EPILOGUE ITERS
  DTYPE     f16 or bf16
  OP        gemm (A, B, C = M, N, K), softmax, layernorm or cumsum (A,
            B = rows, cols over the last axis; C ignored), conv (A = "N,H,C,K,R,S,P":
            batch, height = width, channels in and out, kernel R×R,
            stride S, padding P; B, C ignored): conv2d + bias on
            channels_last tensors (cuDNN), attention (A = "B,H,S,D"; B, C
            ignored): scaled_dot_product_attention with the flash backend,
            minilm (A = "B,S"; B, C ignored): all-MiniLM-L6-v2's encoder
            (transformers' BertModel: hidden 384, 6 layers, 12 heads,
            FFN 1536, SDPA attention; random weights) on `inputs_embeds`
            with an all-ones mask, then masked mean pooling and L2
            normalisation, under torch.inference_mode()
  EPILOGUE  gemm: none: torch.matmul (cuBLAS); bias_relu:
            torch.relu(x @ w + b), unfused (matmul, add, ReLU);
            attention: causal (is_causal=True) or none
Prints one line: `seconds_per_iteration` measured with CUDA events over
ITERS iterations after a warm-up. Exits 3 with a message on stderr when
torch or a GPU is missing.
"""
import sys


def main():
    dtype_name, op = sys.argv[1], sys.argv[2]
    m, n, k = (0, 0, 0) if op in ("conv", "attention", "minilm") else map(int, sys.argv[3:6])
    epilogue, iters = sys.argv[6], int(sys.argv[7])
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
    if op == "softmax":
        x = torch.randn(m, n, device=dev, dtype=dtype)
        step = lambda: torch.softmax(x, dim=-1)
    elif op == "cumsum":
        x = torch.randn(m, n, device=dev, dtype=dtype)
        step = lambda: torch.cumsum(x, dim=-1)
    elif op == "layernorm":
        x = torch.randn(m, n, device=dev, dtype=dtype)
        g = torch.randn(n, device=dev, dtype=dtype)
        b = torch.randn(n, device=dev, dtype=dtype)
        step = lambda: torch.nn.functional.layer_norm(x, (n,), g, b, eps=1e-5)
    elif op == "conv":
        bn, hw, c, kout, r, stride, pad = map(int, sys.argv[3].split(","))
        cl = torch.channels_last
        x = torch.randn(bn, c, hw, hw, device=dev, dtype=dtype).to(memory_format=cl)
        w = torch.randn(kout, c, r, r, device=dev, dtype=dtype).to(memory_format=cl)
        b = torch.randn(kout, device=dev, dtype=dtype)
        step = lambda: torch.nn.functional.conv2d(x, w, b, stride=stride, padding=pad)
    elif op == "attention":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        bn, heads, seq, d = map(int, sys.argv[3].split(","))
        q, kk, v = (torch.randn(bn, heads, seq, d, device=dev, dtype=dtype) for _ in range(3))

        def step():
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(q, kk, v, is_causal=epilogue == "causal")

    elif op == "minilm":
        import transformers

        bn, seq = map(int, sys.argv[3].split(","))
        config = transformers.BertConfig(
            hidden_size=384,
            num_hidden_layers=6,
            num_attention_heads=12,
            intermediate_size=1536,
            layer_norm_eps=1e-12,
            attn_implementation="sdpa",
        )
        model = transformers.BertModel(config)
        model.pooler = None  # the sentence embedding is the mean pooling below
        model = model.to(dev, dtype).eval()
        x = torch.randn(bn, seq, 384, device=dev, dtype=dtype)
        mask = torch.ones(bn, seq, device=dev, dtype=torch.long)

        def step():
            with torch.inference_mode():
                h = model(inputs_embeds=x, attention_mask=mask).last_hidden_state
                w = mask.unsqueeze(-1).to(dtype)
                e = (h * w).sum(1) / w.sum(1).clamp(min=1e-9)
                return torch.nn.functional.normalize(e, dim=-1)

    elif op != "gemm":
        print(f"unknown op {op}", file=sys.stderr)
        sys.exit(2)
    else:
        x = torch.randn(m, k, device=dev, dtype=dtype)
        w = torch.randn(k, n, device=dev, dtype=dtype)
        b = torch.randn(n, device=dev, dtype=dtype)
    if op != "gemm":
        pass
    elif epilogue == "none":
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
