#!/usr/bin/env python3
"""Fixtures and references for image_model and embedding_head (tests/image_model.rs),
made here, never downloaded. Models have the real architectures' input and output
shapes with tiny widths and random (seeded) weights.

  image-model-fixtures.py models DIR
      siglip-tower.onnx: float32 pixel_values [N,3,32,32] -> last_hidden_state
        [N,16,24] (first output, as transformers' SiglipVisionModel exports it) and
        pooler_output [N,24] (patch 8 convolution, mean pool, projection).
      imagenet-classifier.onnx: float32 input [N,3,32,32] -> logits [N,1000] (a
        convolution, global average pool, 1000-way linear layer: a timm/torchvision
        classifier's shapes).
      aesthetic-head.onnx: float32 input [N,16] -> output [N,1] (an MLP, as the LAION
        aesthetic predictor over [N,768] CLIP ViT-L/14 embeddings, tiny).
      detector-head.onnx: float32 input [N,16] -> logits [N,2] (a linear probe).
  image-model-fixtures.py siglip DIR SIZE IMAGE...
      transformers' SiglipImageProcessor (size SIZE x SIZE, its defaults otherwise) on
      the images, and onnxruntime-Python's pooler_output of those tensors (when DIR is
      not "-"). Prints JSON {"tensors": [...], "outputs": [...]}.
  image-model-fixtures.py pillow DIR SIZE RESIZE CROP_PCT INTERP MEAN STD IMAGE...
      torchvision's PIL path written with Pillow (torchvision needs torch, too big to
      install for a test): RESIZE "shorter_side" is Resize(int) (shorter side to
      floor(SIZE / CROP_PCT), longer side int(short' * long / short)), "square" resizes
      both sides; CenterCrop(SIZE) with Python's round; ToTensor (/255); Normalize(MEAN,
      STD) (comma-separated). With DIR not "-", onnxruntime-Python's logits of
      imagenet-classifier.onnx and their softmax. Prints JSON.
  image-model-fixtures.py head MODEL EMBEDDINGS.json
      onnxruntime-Python's output of the head on the given rows. Prints JSON.
"""
import json
import math
import os
import sys

import numpy as np


def models(out):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(20261203)
    os.makedirs(out, exist_ok=True)

    def save(nodes, name, inputs, outputs, inits):
        g = helper.make_graph(nodes, name, inputs, outputs,
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out, name + ".onnx"))

    f32 = np.float32
    # SigLIP-shaped tower: 32x32, patch 8 -> 16 tokens of width 24.
    save([helper.make_node("Conv", ["pixel_values", "wp", "bp"], ["p"], strides=[8, 8]),
          helper.make_node("Reshape", ["p", "tok"], ["t"]),
          helper.make_node("Transpose", ["t"], ["last_hidden_state"], perm=[0, 2, 1]),
          helper.make_node("ReduceMean", ["last_hidden_state"], ["mean"], axes=[1], keepdims=0),
          helper.make_node("MatMul", ["mean", "wh"], ["h"]),
          helper.make_node("Add", ["h", "bh"], ["pooler_output"])],
         "siglip-tower",
         [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch", 3, 32, 32])],
         [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", 16, 24]),
          helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, ["batch", 24])],
         {"wp": rng.normal(0, 0.1, (24, 3, 8, 8)).astype(f32),
          "bp": rng.normal(0, 0.1, (24,)).astype(f32),
          "tok": np.array([0, 24, 16], dtype=np.int64),
          "wh": rng.normal(0, 0.3, (24, 24)).astype(f32),
          "bh": rng.normal(0, 0.1, (24,)).astype(f32)})
    # ImageNet classifier: 1000 logits.
    save([helper.make_node("Conv", ["input", "wc", "bc"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
          helper.make_node("Relu", ["c"], ["r"]),
          helper.make_node("GlobalAveragePool", ["r"], ["g"]),
          helper.make_node("Flatten", ["g"], ["f"]),
          helper.make_node("Gemm", ["f", "wf", "bf"], ["logits"])],
         "imagenet-classifier",
         [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 32, 32])],
         [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1000])],
         {"wc": rng.normal(0, 0.3, (8, 3, 3, 3)).astype(f32),
          "bc": rng.normal(0, 0.1, (8,)).astype(f32),
          "wf": rng.normal(0, 1.0, (8, 1000)).astype(f32),
          "bf": rng.normal(0, 0.1, (1000,)).astype(f32)})
    # The aesthetic predictor's shape: an MLP to one score.
    save([helper.make_node("Gemm", ["input", "w1", "b1"], ["h1"]),
          helper.make_node("Relu", ["h1"], ["r1"]),
          helper.make_node("Gemm", ["r1", "w2", "b2"], ["output"])],
         "aesthetic-head",
         [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 16])],
         [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 1])],
         {"w1": rng.normal(0, 0.5, (16, 8)).astype(f32),
          "b1": rng.normal(0, 0.1, (8,)).astype(f32),
          "w2": rng.normal(0, 0.5, (8, 1)).astype(f32),
          "b2": np.array([5.0], dtype=f32)})
    save([helper.make_node("Gemm", ["input", "w", "b"], ["logits"])],
         "detector-head",
         [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 16])],
         [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2])],
         {"w": rng.normal(0, 2.0, (16, 2)).astype(f32),
          "b": np.array([0.1, -0.1], dtype=f32)})


def session(path):
    import onnxruntime as ort

    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def siglip(model_dir, size, images):
    from PIL import Image
    from transformers import SiglipImageProcessor

    proc = SiglipImageProcessor(size={"height": size, "width": size})
    ims = [Image.open(p).convert("RGB") for p in images]
    x = proc(images=ims, return_tensors="np")["pixel_values"].astype(np.float32)
    out = {"tensors": x.reshape(len(images), -1).tolist()}
    if model_dir != "-":
        s = session(os.path.join(model_dir, "siglip-tower.onnx"))
        out["outputs"] = s.run(["pooler_output"], {"pixel_values": x})[0].tolist()
    print(json.dumps(out))


PIL_FILTERS = {"nearest": 0, "bilinear": 2, "bicubic": 3}


def pillow_tensor(path, size, resize, crop_pct, interp, mean, std):
    """torchvision.transforms (PIL backend): Resize, CenterCrop, ToTensor, Normalize."""
    from PIL import Image

    im = Image.open(path).convert("RGB")
    w, h = im.size
    target = math.floor(size / crop_pct)
    if resize == "square":
        nw, nh = target, target
    else:
        short, long = (w, h) if w <= h else (h, w)
        new_long = int(target * long / short)
        nw, nh = (target, new_long) if w <= h else (new_long, target)
    if (nw, nh) != (w, h):
        im = im.resize((nw, nh), PIL_FILTERS[interp])
    left = int(round((nw - size) / 2.0))
    top = int(round((nh - size) / 2.0))
    im = im.crop((left, top, left + size, top + size))
    a = np.asarray(im, dtype=np.float32) / np.float32(255.0)
    a = (a - np.array(mean, dtype=np.float32)) / np.array(std, dtype=np.float32)
    return a.transpose(2, 0, 1)


def pillow(model_dir, size, resize, crop_pct, interp, mean, std, images):
    mean = [float(v) for v in mean.split(",")]
    std = [float(v) for v in std.split(",")]
    x = np.stack([pillow_tensor(p, size, resize, crop_pct, interp, mean, std)
                  for p in images]).astype(np.float32)
    out = {"tensors": x.reshape(len(images), -1).tolist()}
    if model_dir != "-":
        logits = session(os.path.join(model_dir, "imagenet-classifier.onnx")).run(
            None, {"input": x})[0].astype(np.float64)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        out["outputs"] = logits.tolist()
        out["softmax"] = (e / e.sum(axis=1, keepdims=True)).tolist()
    print(json.dumps(out))


def head(model, rows_file):
    x = np.array(json.load(open(rows_file)), dtype=np.float32)
    s = session(model)
    print(json.dumps(s.run(None, {s.get_inputs()[0].name: x})[0].tolist()))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "models":
        models(sys.argv[2])
    elif cmd == "siglip":
        siglip(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    elif cmd == "pillow":
        pillow(sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]), sys.argv[6],
               sys.argv[7], sys.argv[8], sys.argv[9:])
    elif cmd == "head":
        head(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown command {cmd}")
