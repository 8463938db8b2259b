#!/usr/bin/env python3
"""Test fixtures and references for `tokenize` and `text_model` (tests/tokenizers.rs,
tests/text_model.rs), made here, never downloaded.

  text-fixtures.py corpus OUT.jsonl PER_LANG
      Real text: PER_LANG sentences of each language of ../shared/data/langid (75
      languages, many scripts) and every snippet of the extraction set's evaldata.json,
      one JSON object {"text", "lang"} per line.
  text-fixtures.py tokenizers DIR CORPUS.jsonl
      Trains three tokenizer.json files on the corpus with the `tokenizers` package:
      wordpiece.json (BERT: BertNormalizer, BertPreTokenizer, [CLS] … [SEP]),
      bpe.json (GPT-2 byte-level BPE: a look-ahead regex, so Rust's fancy-regex runs
      it) and unigram.json (XLM-R style: NFKC, Metaspace, <s> … </s>).
  text-fixtures.py encode TOKENIZER CORPUS.jsonl SPECIAL
      The package's own ids of every text (SPECIAL: 1 adds special tokens). JSON list.
  text-fixtures.py offsets TOKENIZER CORPUS.jsonl SPECIAL
      The package's token offsets of every text, as [start, end] byte offsets. JSON list.
  text-fixtures.py models DIR VOCAB
      Tiny BERT-shaped encoders (seeded random weights, hidden 16, one attention layer
      with BERT's additive mask, 64 positions): encoder.onnx (input_ids,
      attention_mask, token_type_ids -> last_hidden_state [N,T,16]), encoder-notypes.onnx
      (no token_type_ids, as ModernBERT), regression.onnx ([N,1] logits from the first
      token, FineWeb-Edu's head), classifier.onnx ([N,3]), small-vocab.onnx (an
      embedding table of 50 rows), float-ids.onnx (input_ids as float: mismatched).
  text-fixtures.py docs OUT.jsonl CORPUS.jsonl
      Documents of 15 consecutive corpus lines (one language each, ~1,600 bytes), for
      speed measurements of long inputs.
  text-fixtures.py speed-tokenize CORPUS.jsonl TOKENIZER...
  text-fixtures.py speed-model MODEL TOKENIZER CORPUS.jsonl MAX_LEN BATCH N
      The Python packages' speed on one core (process CPU time; run with
      TOKENIZERS_PARALLELISM=false): tokenizers' encode_batch_fast, and tokenizers +
      onnxruntime with one thread, batches in input order, beside
      scripts/text-bench (docs/PERFORMANCE.md).
  text-fixtures.py bert OUT.onnx LAYERS HIDDEN HEADS
      A BERT-shaped encoder of real size for speed measurements (docs/PERFORMANCE.md):
      LAYERS post-norm layers of HEADS-head attention and a 4×HIDDEN GELU feed-forward,
      a 30,522-token embedding table, 512 positions, random weights.
  text-fixtures.py infer MODEL TOKENIZER CORPUS.jsonl MAX_LEN
      onnxruntime-Python's output for every text: the tokenizer truncating to MAX_LEN,
      padded to the longest of each batch of 16, int64 inputs. Prints JSON
      {"out": [[...], ...], "shape": [...]} with per-text rows: for a [N,T,H] output the
      mean over the attention mask and the first token ("mean", "cls"); else the row.
"""
import glob
import gzip
import json
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def corpus(out, per_lang):
    rows = []
    for f in sorted(glob.glob(os.path.join(ROOT, "langid", "lingua-testdata-sentences", "*.txt.gz"))):
        lang = os.path.basename(f).split(".")[0]
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if i >= per_lang:
                    break
                rows.append({"text": line.rstrip("\n"), "lang": lang})
    with open(os.path.join(ROOT, "extraction-dev", "evaldata.json"), encoding="utf-8") as fh:
        for v in json.load(fh).values():
            for k in ("with", "without"):
                for t in v.get(k, []):
                    rows.append({"text": t, "lang": "web"})
    with open(out, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def texts_of(path):
    with open(path, encoding="utf-8") as fh:
        return [json.loads(l)["text"] for l in fh]


def tokenizers_(out, path):
    from tokenizers import (Tokenizer, decoders, models, normalizers, pre_tokenizers,
                            processors, trainers)
    texts = texts_of(path)

    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.normalizer = normalizers.BertNormalizer(lowercase=True)
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.train_from_iterator(texts, trainers.WordPieceTrainer(
        vocab_size=3000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    wp.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", wp.token_to_id("[CLS]")), ("[SEP]", wp.token_to_id("[SEP]"))])
    wp.decoder = decoders.WordPiece()
    wp.save(os.path.join(out, "wordpiece.json"))

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=3000, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    bpe.save(os.path.join(out, "bpe.json"))

    ug = Tokenizer(models.Unigram())
    ug.normalizer = normalizers.NFKC()
    ug.pre_tokenizer = pre_tokenizers.Metaspace()
    ug.decoder = decoders.Metaspace()
    ug.train_from_iterator(texts, trainers.UnigramTrainer(
        vocab_size=3000, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], unk_token="<unk>"))
    ug.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
    ug.save(os.path.join(out, "unigram.json"))


def encode(tok, path, special):
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(tok)
    t.no_truncation()
    t.no_padding()
    enc = t.encode_batch(texts_of(path), add_special_tokens=special == "1")
    print(json.dumps([e.ids for e in enc]))


def offsets(tok, path, special):
    """The package's token offsets of every text, as byte offsets into its UTF-8."""
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(tok)
    t.no_truncation()
    t.no_padding()
    texts = texts_of(path)
    enc = t.encode_batch(texts, add_special_tokens=special == "1")
    out = []
    for text, e in zip(texts, enc):
        at = [0]
        for ch in text:
            at.append(at[-1] + len(ch.encode("utf-8")))
        out.append([[at[a], at[b]] for a, b in e.offsets])
    print(json.dumps(out))


H, POS = 16, 64


def models(out, vocab):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(20261203)

    def arr(*shape, s=0.3):
        return rng.normal(0, s, shape).astype(np.float32)

    word, pos, typ = arr(vocab, H), arr(POS, H), arr(2, H)
    wq, wk, wv, wo = arr(H, H), arr(H, H), arr(H, H), arr(H, H)
    g1, b1 = (1 + arr(H, s=0.1)), arr(H, s=0.1)
    head1, head3 = arr(H, 1), arr(H, 3)

    def encoder(name, types=True, head=None, vocab_rows=None, ids_type=TensorProto.INT64):
        w = word if vocab_rows is None else word[:vocab_rows]
        inits = [numpy_helper.from_array(a, n) for a, n in [
            (w, "word"), (pos, "pos"), (typ, "typ"), (wq, "wq"), (wk, "wk"), (wv, "wv"),
            (wo, "wo"), (g1, "g1"), (b1, "b1"),
            (np.array(0, dtype=np.int64), "zero"),
            (np.array(1, dtype=np.int64), "step"),
            (np.array(1.0, dtype=np.float32), "onef"),
            (np.array(-10000.0, dtype=np.float32), "neg"),
            (np.array(1.0 / np.sqrt(H), dtype=np.float32), "scale"),
            (np.array([1], dtype=np.int64), "ax1")]]
        nodes = []
        ids = "input_ids"
        if ids_type != TensorProto.INT64:
            nodes.append(helper.make_node("Cast", [ids], ["ids64"], to=TensorProto.INT64))
            ids = "ids64"
        nodes += [
            helper.make_node("Gather", ["word", ids], ["e"]),
            helper.make_node("Shape", [ids], ["shp"]),
            helper.make_node("Gather", ["shp", "step"], ["tlen"]),
            helper.make_node("Range", ["zero", "tlen", "step"], ["positions"]),
            helper.make_node("Gather", ["pos", "positions"], ["p"]),
            helper.make_node("Add", ["e", "p"], ["ep"]),
        ]
        x = "ep"
        if types:
            nodes += [helper.make_node("Gather", ["typ", "token_type_ids"], ["tt"]),
                      helper.make_node("Add", ["ep", "tt"], ["ept"])]
            x = "ept"
        nodes += [
            helper.make_node("LayerNormalization", [x, "g1", "b1"], ["x0"], axis=-1, epsilon=1e-12),
            helper.make_node("MatMul", ["x0", "wq"], ["q"]),
            helper.make_node("MatMul", ["x0", "wk"], ["k"]),
            helper.make_node("MatMul", ["x0", "wv"], ["v"]),
            helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
            helper.make_node("MatMul", ["q", "kt"], ["s0"]),
            helper.make_node("Mul", ["s0", "scale"], ["s1"]),
            helper.make_node("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["mf", "ax1"], ["mu"]),
            helper.make_node("Sub", ["onef", "mu"], ["inv"]),
            helper.make_node("Mul", ["inv", "neg"], ["bias"]),
            helper.make_node("Add", ["s1", "bias"], ["s2"]),
            helper.make_node("Softmax", ["s2"], ["a"], axis=-1),
            helper.make_node("MatMul", ["a", "v"], ["o"]),
            helper.make_node("MatMul", ["o", "wo"], ["o2"]),
            helper.make_node("Add", ["x0", "o2"], ["x1"]),
            helper.make_node("LayerNormalization", ["x1", "g1", "b1"], ["last_hidden_state"],
                             axis=-1, epsilon=1e-12),
        ]
        inputs = [helper.make_tensor_value_info("input_ids", ids_type, ["batch", "seq"]),
                  helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])]
        if types:
            inputs.append(helper.make_tensor_value_info("token_type_ids", TensorProto.INT64,
                                                        ["batch", "seq"]))
        if head is None:
            outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                                     ["batch", "seq", H])]
        else:
            # The regression head is centred on 2.5 so scores fall on both sides of
            # FineWeb-Edu's 0..5 clamp.
            bias = np.full((head.shape[1],), 2.5 if head.shape[1] == 1 else 0.0, np.float32)
            inits += [numpy_helper.from_array(head * 2, "head"),
                      numpy_helper.from_array(bias, "hb")]
            nodes += [helper.make_node("Gather", ["last_hidden_state", "zero"], ["cls"], axis=1),
                      helper.make_node("MatMul", ["cls", "head"], ["hm"]),
                      helper.make_node("Add", ["hm", "hb"], ["logits"])]
            outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                                     ["batch", head.shape[1]])]
        g = helper.make_graph(nodes, name, inputs, outputs, inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out, name + ".onnx"))

    encoder("encoder")
    encoder("encoder-notypes", types=False)
    encoder("regression", head=head1)
    encoder("classifier", head=head3)
    encoder("small-vocab", vocab_rows=50)
    encoder("float-ids", ids_type=TensorProto.FLOAT)


def docs(out, path):
    rows = []
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(l) for l in fh]
    with open(out, "w", encoding="utf-8") as fh:
        for i in range(0, 3000, 15):
            d = {"text": " ".join(r["text"] for r in rows[i:i + 15]), "lang": rows[i]["lang"]}
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")


def speed_tokenize(path, *toks):
    import time
    from tokenizers import Tokenizer
    texts = texts_of(path)
    for tok in toks:
        t = Tokenizer.from_file(tok)
        t.no_truncation()
        t.no_padding()
        best = 1e9
        for _ in range(3):
            t0 = time.process_time()
            n = 0
            for i in range(0, len(texts), 1024):
                n += sum(len(e.ids) for e in t.encode_batch_fast(texts[i:i + 1024],
                                                                  add_special_tokens=False))
            best = min(best, time.process_time() - t0)
        print(f"{tok}: {len(texts) / best:.0f} records/s, {n / best:.0f} tokens/s")


def speed_model(model, tok, path, max_len, batch, n):
    import time
    import onnxruntime as ort
    from tokenizers import Tokenizer
    texts = texts_of(path)[:int(n)]
    batch = int(batch)
    t = Tokenizer.from_file(tok)
    t.enable_truncation(int(max_len))
    t.enable_padding(pad_id=0)
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.inter_op_num_threads = 1
    s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
    names = [i.name for i in s.get_inputs()]
    t0 = time.process_time()
    for i in range(0, len(texts), batch):
        enc = t.encode_batch(texts[i:i + batch])
        feed = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
        s.run(None, {k: v for k, v in feed.items() if k in names})
    dt = time.process_time() - t0
    print(f"{model} max_length {max_len} batch {batch}: {len(texts) / dt:.1f} records/s")


def bert(out, layers, hidden, heads):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    layers, hidden, heads = int(layers), int(hidden), int(heads)
    dh = hidden // heads

    def w(*shape):
        return numpy_helper.from_array(rng.normal(0, 0.02, shape).astype(np.float32), f"w{len(inits)}")

    inits, nodes = [], []

    def const(v, dtype=np.int64):
        t = numpy_helper.from_array(np.array(v, dtype=dtype), f"c{len(inits)}")
        inits.append(t)
        return t.name

    def param(*shape):
        t = w(*shape)
        inits.append(t)
        return t.name

    def node(op, ins, **kw):
        o = f"n{len(nodes)}"
        nodes.append(helper.make_node(op, ins, [o], **kw))
        return o

    ones, zeros = lambda: const(np.ones(hidden), np.float32), lambda: const(np.zeros(hidden), np.float32)
    e = node("Gather", [param(30522, hidden), "input_ids"])
    tlen = node("Gather", [node("Shape", ["input_ids"]), const(1)])
    p = node("Gather", [param(512, hidden), node("Range", [const(0), tlen, const(1)])])
    tt = node("Gather", [param(2, hidden), "token_type_ids"])
    x = node("LayerNormalization", [node("Add", [node("Add", [e, p]), tt]), ones(), zeros()], axis=-1)
    mf = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", [const(1.0, np.float32), node("Unsqueeze", [mf, const([1, 2])])]),
                        const(-10000.0, np.float32)])
    split = const([0, 0, heads, dh])
    for _ in range(layers):
        def heads_of(t):
            return node("Transpose", [node("Reshape", [t, split])], perm=[0, 2, 1, 3])
        q = heads_of(node("Add", [node("MatMul", [x, param(hidden, hidden)]), zeros()]))
        k = heads_of(node("Add", [node("MatMul", [x, param(hidden, hidden)]), zeros()]))
        v = heads_of(node("Add", [node("MatMul", [x, param(hidden, hidden)]), zeros()]))
        s = node("Mul", [node("MatMul", [q, node("Transpose", [k], perm=[0, 1, 3, 2])]),
                         const(1.0 / np.sqrt(dh), np.float32)])
        a = node("Softmax", [node("Add", [s, bias])], axis=-1)
        o = node("Reshape", [node("Transpose", [node("MatMul", [a, v])], perm=[0, 2, 1, 3]),
                             const([0, 0, hidden])])
        o = node("Add", [node("MatMul", [o, param(hidden, hidden)]), zeros()])
        x = node("LayerNormalization", [node("Add", [x, o]), ones(), zeros()], axis=-1)
        f = node("MatMul", [x, param(hidden, 4 * hidden)])
        # GELU (erf form), as BERT.
        g = node("Mul", [node("Mul", [f, const(0.5, np.float32)]),
                         node("Add", [node("Erf", [node("Div", [f, const(np.sqrt(2.0), np.float32)])]),
                                      const(1.0, np.float32)])])
        f2 = node("MatMul", [g, param(4 * hidden, hidden)])
        x = node("LayerNormalization", [node("Add", [x, f2]), ones(), zeros()], axis=-1)
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
           for n in ("input_ids", "attention_mask", "token_type_ids")]
    outs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                          ["batch", "seq", hidden])]
    m = helper.make_model(helper.make_graph(nodes, "bert", ins, outs, inits),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, out)


def infer(model, tok, path, max_len):
    import onnxruntime as ort
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(tok)
    t.enable_truncation(int(max_len))
    t.enable_padding(pad_id=0)
    s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [i.name for i in s.get_inputs()]
    texts = texts_of(path)
    out = {"mean": [], "cls": [], "rows": []}
    for i in range(0, len(texts), 16):
        enc = t.encode_batch(texts[i:i + 16])
        feed = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
        r = s.run(None, {k: v for k, v in feed.items() if k in names})[0]
        if r.ndim == 3:
            m = feed["attention_mask"][:, :, None].astype(np.float32)
            mean = (r * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
            out["mean"] += mean.tolist()
            out["cls"] += r[:, 0].tolist()
        else:
            out["rows"] += r.tolist()
    print(json.dumps(out))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"corpus": lambda: corpus(args[0], int(args[1])),
     "tokenizers": lambda: tokenizers_(*args),
     "encode": lambda: encode(*args),
     "offsets": lambda: offsets(*args),
     "models": lambda: models(args[0], int(args[1])),
     "bert": lambda: bert(*args),
     "docs": lambda: docs(*args),
     "speed-tokenize": lambda: speed_tokenize(*args),
     "speed-model": lambda: speed_model(*args),
     "infer": lambda: infer(*args)}[cmd]()
