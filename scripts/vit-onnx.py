#!/usr/bin/env python3
"""A CLIP-style ViT image tower as ONNX, random weights (seeded), built with onnx's
helper: the real architecture's shapes for benchmarks (scripts/gpu-bench.sh), never a
trained model. Defaults are OpenAI CLIP ViT-B/32's visual tower: 224x224 input, patch
32 (49 patches + a class token), width 768, 12 layers of 12 heads, MLP 3072 with
QuickGELU, pre-norm, ln_post on the class token, projection to 512.

  vit-onnx.py OUT.onnx [--fp16] [--size 224] [--patch 32] [--width 768] [--layers 12]
                       [--heads 12] [--dim 512]

Input `pixel_values` [batch, 3, size, size] (float16 with --fp16, which makes every
weight and activation float16, as an fp16 export does), output `image_embeds`
[batch, dim].
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(a):
    rng = np.random.default_rng(32)
    dt = np.float16 if a.fp16 else np.float32
    et = TensorProto.FLOAT16 if a.fp16 else TensorProto.FLOAT
    grid = a.size // a.patch
    tokens = grid * grid + 1
    w, hd = a.width, a.width // a.heads
    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def rand(name, shape, std=0.02):
        return init(name, rng.normal(0, std, shape).astype(dt))

    def const_i64(name, v):
        return init(name, np.array(v, dtype=np.int64))

    def node(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], **kw))
        return out

    def ln(x, p):
        s = init(p + ".g", np.ones(w, dtype=dt))
        b = init(p + ".b", np.zeros(w, dtype=dt))
        return node("LayerNormalization", [x, s, b], p + ".out", axis=-1, epsilon=1e-5)

    def linear(x, p, n_in, n_out):
        m = node("MatMul", [x, rand(p + ".w", (n_in, n_out))], p + ".mm")
        return node("Add", [m, init(p + ".bias", np.zeros(n_out, dtype=dt))], p + ".out")

    x = node("Conv", ["pixel_values", rand("conv1", (w, 3, a.patch, a.patch))], "patches",
             strides=[a.patch, a.patch])
    x = node("Reshape", [x, const_i64("shape_nwc", [0, w, grid * grid])], "flat")
    x = node("Transpose", [x], "seq", perm=[0, 2, 1])
    # The class token, broadcast over the batch without shape arithmetic.
    first = node("Slice", [x, const_i64("s0", [0]), const_i64("s1", [1]), const_i64("ax1", [1])],
                 "first")
    zero = node("Mul", [first, init("zero", np.zeros((), dtype=dt))], "zeros")
    cls = node("Add", [zero, rand("cls", (1, 1, w))], "cls_b")
    x = node("Concat", [cls, x], "with_cls", axis=1)
    x = node("Add", [x, rand("pos", (1, tokens, w), 0.01)], "pos_added")
    x = ln(x, "ln_pre")
    scale = init("attn_scale", np.array(1.0 / np.sqrt(hd), dtype=dt))
    qk_shape = const_i64("qkv_shape", [0, 0, 3, a.heads, hd])
    merge = const_i64("merge_shape", [0, 0, w])
    gelu_k = init("gelu_k", np.array(1.702, dtype=dt))
    for i in range(a.layers):
        p = f"l{i}"
        h = ln(x, p + ".ln1")
        qkv = linear(h, p + ".qkv", w, 3 * w)
        qkv = node("Reshape", [qkv, qk_shape], p + ".qkv5")
        qkv = node("Transpose", [qkv], p + ".qkvT", perm=[2, 0, 3, 1, 4])
        q, k, v = (node("Gather", [qkv, const_i64(f"{p}.i{j}", j)], f"{p}.{n}", axis=0)
                   for j, n in enumerate("qkv"))
        kt = node("Transpose", [k], p + ".kT", perm=[0, 1, 3, 2])
        s = node("MatMul", [q, kt], p + ".scores")
        s = node("Mul", [s, scale], p + ".scaled")
        s = node("Softmax", [s], p + ".attn", axis=-1)
        o = node("MatMul", [s, v], p + ".ctx")
        o = node("Transpose", [o], p + ".ctxT", perm=[0, 2, 1, 3])
        o = node("Reshape", [o, merge], p + ".ctx2")
        o = linear(o, p + ".out", w, w)
        x = node("Add", [x, o], p + ".res1")
        h = ln(x, p + ".ln2")
        h = linear(h, p + ".fc", w, 4 * w)
        g = node("Sigmoid", [node("Mul", [h, gelu_k], p + ".gk")], p + ".gs")
        h = node("Mul", [h, g], p + ".gelu")
        h = linear(h, p + ".proj", 4 * w, w)
        x = node("Add", [x, h], p + ".res2")
    x = node("Gather", [x, const_i64("cls_index", 0)], "cls_out", axis=1)
    x = ln(x, "ln_post")
    node("MatMul", [x, rand("proj", (w, a.dim))], "image_embeds")
    g = helper.make_graph(
        nodes, "clip_vit_visual",
        [helper.make_tensor_value_info("pixel_values", et, ["batch", 3, a.size, a.size])],
        [helper.make_tensor_value_info("image_embeds", et, ["batch", a.dim])],
        inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--fp16", action="store_true")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--patch", type=int, default=32)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--dim", type=int, default=512)
    a = ap.parse_args()
    m = build(a)
    onnx.save(m, a.out)
    n = sum(int(np.prod(t.dims)) for t in m.graph.initializer)
    print(f"{a.out}: {n / 1e6:.1f}M parameters, {'fp16' if a.fp16 else 'fp32'}")
