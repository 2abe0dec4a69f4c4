#!/usr/bin/env python3
"""The PyTorch side of `bench_gpu` (crates/tgc-cli/examples/bench_gpu.rs).

Usage: bench_torch.py DTYPE OP A B C EPILOGUE ITERS OUTPUT INPUT.npy...
  DTYPE     f16 or bf16
  OP        gemm (A, B, C = M, N, K; inputs x [M, K], w [K, N], with
            bias_relu also bias [N]), softmax, cumsum (input x; A, B =
            rows, cols over the last axis; C ignored), layernorm (inputs x,
            gamma, beta), conv (A = "N,H,C,K,R,S,P": batch, height = width,
            channels in and out, kernel R×R, stride S, padding P; B, C
            ignored; inputs x NHWC, w OHWI, b [K], output NHWC): conv2d +
            bias on channels_last tensors (cuDNN), attention (A = "B,H,S,D";
            B, C ignored; inputs q, k, v [B, H, S, D]):
            scaled_dot_product_attention with the flash backend, minilm
            (A = "B,S"; B, C ignored; inputs those of
            examples/minilm/graphs/minilm.tgc's `main`, in its order):
            all-MiniLM-L6-v2's encoder (transformers' BertModel: hidden 384,
            6 layers, 12 heads, FFN 1536, GELU erf, SDPA attention) with the
            graph's weights, on its token ids and mask, then masked mean
            pooling and L2 normalisation, under torch.inference_mode()
  EPILOGUE  gemm: none: torch.matmul (cuBLAS); bias_relu:
            torch.relu(x @ w + b), unfused (matmul, add, ReLU);
            attention: causal (is_causal=True) or none
  OUTPUT    where the output of the last run is written (.npy, f32: exact
            for f16 and bf16)
  INPUT     tgc's inputs (.npy, f16 or f32; bf16 is written as f32, which
            holds it exactly), converted to DTYPE on the device; the mask
            and token ids keep theirs
Prints one line: `seconds_per_iteration`: 5 warm-up runs, then ITERS runs
between two CUDA events (bench_gpu times tgc the same way). Exits 3 with a
message on stderr when torch, NumPy or a GPU is missing.
"""
import sys

WARMUP = 5  # bench_gpu's WARMUP
MINILM_INPUTS = [
    "ids", "mask", "word", "position", "token_type", "eg", "eb", "wq", "bq", "wk", "bk",
    "wv", "bv", "wo", "bo", "g1", "b1", "wi", "bi", "wf", "bf", "g2", "b2",
]


def minilm(torch, xs, dtype, dev):
    """all-MiniLM-L6-v2's encoder with the weights of `xs` (the graph's
    inputs by MINILM_INPUTS), and a function computing the sentence
    embeddings."""
    import transformers

    t = dict(zip(MINILM_INPUTS, xs))
    config = transformers.BertConfig(
        hidden_size=384,
        num_hidden_layers=6,
        num_attention_heads=12,
        intermediate_size=1536,
        hidden_act="gelu",
        layer_norm_eps=1e-12,
        attn_implementation="sdpa",
    )
    model = transformers.BertModel(config, add_pooling_layer=False)
    state = {
        "embeddings.word_embeddings.weight": t["word"],
        "embeddings.position_embeddings.weight": t["position"],
        "embeddings.token_type_embeddings.weight": t["token_type"],
        "embeddings.LayerNorm.weight": t["eg"],
        "embeddings.LayerNorm.bias": t["eb"],
    }
    for i in range(6):
        p = f"encoder.layer.{i}."
        for name, (w, b) in {
            "attention.self.query": ("wq", "bq"),
            "attention.self.key": ("wk", "bk"),
            "attention.self.value": ("wv", "bv"),
            "attention.output.dense": ("wo", "bo"),
            "attention.output.LayerNorm": ("g1", "b1"),
            "intermediate.dense": ("wi", "bi"),
            "output.dense": ("wf", "bf"),
            "output.LayerNorm": ("g2", "b2"),
        }.items():
            state[p + name + ".weight"] = t[w][i]
            state[p + name + ".bias"] = t[b][i]
    # Every parameter comes from the graph; only the buffers of default
    # position and token type ids may be left (they are not weights).
    loaded = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    left = [k for k in loaded.missing_keys if not k.endswith(("position_ids", "token_type_ids"))]
    if left or loaded.unexpected_keys:
        raise ValueError(f"BertModel's weights do not match the graph's: {left} missing, {loaded.unexpected_keys} unknown")
    model = model.to(dev, dtype).eval()
    ids = t["ids"].to(dev, torch.long)
    mask = t["mask"].to(dev)

    def step():
        with torch.inference_mode():
            h = model(input_ids=ids, attention_mask=mask.to(torch.long)).last_hidden_state
            w = mask.unsqueeze(-1).to(dtype)
            e = (h * w).sum(1) / w.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(e, dim=-1)

    return step


def main():
    dtype_name, op = sys.argv[1], sys.argv[2]
    epilogue, iters, output, paths = sys.argv[6], int(sys.argv[7]), sys.argv[8], sys.argv[9:]
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print(f"torch or NumPy is not installed: {e}", file=sys.stderr)
        sys.exit(3)
    if not torch.cuda.is_available():
        print("torch sees no CUDA device", file=sys.stderr)
        sys.exit(3)
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
    dev = torch.device("cuda")
    host = [torch.from_numpy(np.load(p)) for p in paths]
    xs = [x.to(dev, dtype) for x in host]
    if op == "softmax":
        (x,) = xs
        step = lambda: torch.softmax(x, dim=-1)
    elif op == "cumsum":
        (x,) = xs
        step = lambda: torch.cumsum(x, dim=-1)
    elif op == "layernorm":
        x, g, b = xs
        step = lambda: torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5)
    elif op == "conv":
        _, _, _, _, _, stride, pad = map(int, sys.argv[3].split(","))
        # NHWC and OHWI permuted to NCHW and OIHW: channels_last strides.
        x, w = (t.permute(0, 3, 1, 2) for t in xs[:2])
        b = xs[2]
        step = lambda: torch.nn.functional.conv2d(x, w, b, stride=stride, padding=pad).permute(0, 2, 3, 1)
    elif op == "attention":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q, kk, v = xs

        def step():
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(q, kk, v, is_causal=epilogue == "causal")

    elif op == "minilm":
        step = minilm(torch, host, dtype, dev)
    elif op != "gemm":
        print(f"unknown op {op}", file=sys.stderr)
        sys.exit(2)
    elif epilogue == "none":
        x, w = xs
        step = lambda: torch.matmul(x, w)
    elif epilogue == "bias_relu":
        x, w, b = xs
        step = lambda: torch.relu(torch.matmul(x, w) + b)
    else:
        print(f"unknown epilogue {epilogue}", file=sys.stderr)
        sys.exit(2)
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        y = step()
    end.record()
    torch.cuda.synchronize()
    np.save(output, y.float().contiguous().cpu().numpy())
    print(start.elapsed_time(end) / 1000.0 / iters)


if __name__ == "__main__":
    main()
