#!/usr/bin/env python3
"""Writes the inputs of examples/graphs/gemm_bias_relu.tgc as .npy files
(x: f16[128, 64], w: f16[64, 256], bias: f16[256]; small exact values) into
DIR, for the compute-sanitizer runs of `tgc run --backend cuda`
(scripts/gpu_tests.sh, scripts/gpu_bundle.sh). Standard library only.

Usage: gemm_inputs.py DIR
"""
import os
import struct
import sys


def npy(path, shape):
    n = 1
    for d in shape:
        n *= d
    header = "{'descr': '<f2', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{d}, " for d in shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    vals = [struct.pack("<e", ((i * 7) % 17 - 8) / 16.0) for i in range(n)]
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"".join(vals))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    npy(os.path.join(out, "x.npy"), [128, 64])
    npy(os.path.join(out, "w.npy"), [64, 256])
    npy(os.path.join(out, "bias.npy"), [256])


if __name__ == "__main__":
    main()
