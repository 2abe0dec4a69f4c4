"""An independent NumPy implementation of all-MiniLM-L6-v2 sentence embeddings.

Reads the model's safetensors file directly (no `safetensors` or `torch`
package), computes in float64, and writes the L2-normalised mean-pooled
embeddings. Each sentence runs alone at its own length, with no padding and
no mask, so a padded batch on the tgc side is checked against unpadded
computation here.

Usage: python3 minilm_ref.py MODEL.safetensors < ids.json > embeddings.json
where ids.json is {"input_ids": [[101, ..., 102], ...]} (token-type ids are
all 0, as for single sentences) and the output is {"embeddings": [[...], ...]}.
"""

import json
import struct
import sys

import numpy as np

HIDDEN = 384
HEADS = 12
LAYERS = 6
EPS = 1e-12


def load_safetensors(path):
    """Returns {name: float64 array} for the F32 tensors of the file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        lo, hi = info["data_offsets"]
        a = np.frombuffer(data[lo:hi], dtype="<f4").reshape(info["shape"])
        out[name] = a.astype(np.float64)
    return out


def erf(x):
    """erf to double precision by its Maclaurin series (|x| < 3) and the
    asymptotic continued fraction of erfc beyond; NumPy has no erf."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    a = np.abs(x)
    small = a < 3.0
    xs = x[small]
    term = xs.copy()
    total = xs.copy()
    x2 = xs * xs
    for n in range(1, 120):
        term = term * (-x2) / n
        total = total + term / (2 * n + 1)
    out[small] = 2.0 / np.sqrt(np.pi) * total
    xl = a[~small]
    # erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...))))
    frac = np.zeros_like(xl)
    for k in range(60, 0, -1):
        frac = (k / 2.0) / (xl + frac)
    erfc = np.exp(-xl * xl) / np.sqrt(np.pi) / (xl + frac)
    out[~small] = np.sign(x[~small]) * (1.0 - erfc)
    return out


def layernorm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * g + b


def linear(x, w, b):
    return x @ w.T + b


def embed(w, ids):
    s = len(ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:s]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = layernorm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    d = HIDDEN // HEADS
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        q = linear(x, w[p + "attention.self.query.weight"], w[p + "attention.self.query.bias"])
        k = linear(x, w[p + "attention.self.key.weight"], w[p + "attention.self.key.bias"])
        v = linear(x, w[p + "attention.self.value.weight"], w[p + "attention.self.value.bias"])
        q, k, v = (t.reshape(s, HEADS, d).transpose(1, 0, 2) for t in (q, k, v))
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(d)
        scores = scores - scores.max(axis=-1, keepdims=True)
        p_attn = np.exp(scores)
        p_attn = p_attn / p_attn.sum(axis=-1, keepdims=True)
        ctx = (p_attn @ v).transpose(1, 0, 2).reshape(s, HIDDEN)
        a = linear(ctx, w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"])
        x = layernorm(a + x, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
        h = linear(x, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"])
        h = 0.5 * h * (1.0 + erf(h / np.sqrt(2.0)))
        f = linear(h, w[p + "output.dense.weight"], w[p + "output.dense.bias"])
        x = layernorm(f + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    e = x.mean(axis=0)
    return e / max(np.linalg.norm(e), 1e-12)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 minilm_ref.py MODEL.safetensors < ids.json > embeddings.json")
    w = load_safetensors(sys.argv[1])
    ids = json.load(sys.stdin)["input_ids"]
    json.dump({"embeddings": [embed(w, np.asarray(t, dtype=np.int64)).tolist() for t in ids]}, sys.stdout)


if __name__ == "__main__":
    main()
