//! A fastText supervised-model predictor in pure Rust: it reads `.bin` and quantized
//! `.ftz` bytes ([`Model::from_bytes`]) and predicts a line's top-k labels with the
//! probabilities fastText reports, computed as fastText 0.9 does (same tokenisation,
//! hashing quirks, float order and lookup tables), so results match the `fasttext`
//! package. Pure: it takes bytes and text, never does I/O, never panics on a bad file.
//!
//! A line is predicted as fastText's `predict` does one line: tokens split on ASCII
//! whitespace (space, tab, CR, VT, FF, NUL), the end of the line (or its first `\n`)
//! is the `</s>` token, which ends it.
mod dict;
mod read;

pub use read::{Args, MAGIC, VERSION};

use dict::Dict;
use read::{Matrix, Pq};
use std::cell::RefCell;

/// Why a model file cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FastTextError {
    #[error("not a fastText model (magic {0:#010x}, expected 0x2f4f16ba)")]
    Magic(u32),
    #[error("unsupported fastText format version {0} (11 or 12 expected)")]
    Version(i32),
    #[error("truncated fastText model: {field} at byte {offset} runs past the end")]
    Truncated { field: &'static str, offset: usize },
    #[error("invalid fastText model: {0}")]
    Invalid(String),
    #[error("unsupported fastText model: {0}")]
    Unsupported(String),
}

/// One predicted label.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    /// Index into [`Model::labels`].
    pub label: u32,
    /// The probability as fastText reports it (`exp(log(p + 1e-5))`).
    pub prob: f32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    HierarchicalSoftmax,
    NegativeSampling,
    Softmax,
    OneVsAll,
}

#[derive(Clone, Copy)]
struct Node {
    left: i32,
    right: i32,
}

/// A loaded supervised model.
pub struct Model {
    args: Args,
    loss: Loss,
    dict: Dict,
    input: Matrix,
    output: Matrix,
    labels: Vec<String>,
    quantized: bool,
    /// fastText's sigmoid lookup table (one-vs-all and negative sampling).
    sigmoid: Vec<f32>,
    /// The hierarchical softmax's Huffman tree (leaves first, root last).
    tree: Vec<Node>,
}

/// The widest char n-gram (`maxn`) and word n-gram (`wordNgrams`) mdf reads: a
/// token's work grows with them (a 10 MB token times `maxn`, a line's tokens times
/// `wordNgrams`), and a file claiming 2^31 would make one long text run for hours.
/// fastText's defaults are 6 and 1; published models use at most 6 and 5.
pub const MAX_NGRAM: i32 = 64;

/// Input rows summed into the hidden vector at a time: a line's rows are added as they
/// come, in fastText's order, so a 10 MB text holds this many, not millions.
const CHUNK: usize = 4096;

const SIGMOID_TABLE_SIZE: i64 = 512;
const MAX_SIGMOID: f32 = 8.0;

#[derive(Default)]
struct Scratch {
    ids: Vec<i32>,
    hashes: Vec<i32>,
    word: Vec<u8>,
    hidden: Vec<f32>,
    output: Vec<f32>,
    heap: Heap,
    /// The hierarchical softmax's nodes still to visit, with their scores.
    stack: Vec<(usize, f32)>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// `std_log` of fastText's loss: `log(x + 1e-5)`, in double, stored as float.
#[inline]
fn std_log(x: f32) -> f32 {
    (x as f64 + 1e-5).ln() as f32
}

impl Model {
    /// Reads a `.bin` or `.ftz` file's bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Model, FastTextError> {
        let f = read::parse(bytes)?;
        let loss = match f.args.loss {
            1 => Loss::HierarchicalSoftmax,
            2 => Loss::NegativeSampling,
            3 => Loss::Softmax,
            4 => Loss::OneVsAll,
            l => {
                return Err(FastTextError::Invalid(format!(
                    "args.loss: unknown loss {l}"
                )));
            }
        };
        let dim = f.args.dim as usize;
        if f.args.maxn > MAX_NGRAM && f.args.bucket > 0 {
            return Err(FastTextError::Unsupported(format!(
                "args.maxn {}: char n-grams longer than {MAX_NGRAM}",
                f.args.maxn
            )));
        }
        if f.args.word_ngrams > MAX_NGRAM && f.args.bucket > 0 {
            return Err(FastTextError::Unsupported(format!(
                "args.wordNgrams {}: word n-grams longer than {MAX_NGRAM}",
                f.args.word_ngrams
            )));
        }
        if f.nlabels == 0 {
            return Err(FastTextError::Invalid(
                "the dictionary has no labels".into(),
            ));
        }
        for (m, what) in [(&f.input, "input"), (&f.output, "output")] {
            if m.cols() != dim {
                return Err(FastTextError::Invalid(format!(
                    "{what} matrix has {} columns, args.dim is {dim}",
                    m.cols()
                )));
            }
        }
        if f.output.rows() != f.nlabels {
            return Err(FastTextError::Invalid(format!(
                "output matrix has {} rows for {} labels",
                f.output.rows(),
                f.nlabels
            )));
        }
        let labels = f.entries[f.nwords..]
            .iter()
            .map(|e| String::from_utf8_lossy(&e.word).into_owned())
            .collect();
        let tree = if loss == Loss::HierarchicalSoftmax {
            let counts: Vec<i64> = f.entries[f.nwords..].iter().map(|e| e.count).collect();
            huffman(&counts)
        } else {
            vec![]
        };
        let sigmoid = (0..=SIGMOID_TABLE_SIZE)
            .map(|i| {
                let x =
                    (i * 2 * MAX_SIGMOID as i64) as f32 / SIGMOID_TABLE_SIZE as f32 - MAX_SIGMOID;
                (1.0 / (1.0 + (-x).exp() as f64)) as f32
            })
            .collect();
        let dict = Dict::new(&f)?;
        if let Some(max) = dict.max_id()
            && max >= f.input.rows()
        {
            return Err(FastTextError::Invalid(format!(
                "input matrix has {} rows, the dictionary and buckets need {}",
                f.input.rows(),
                max + 1
            )));
        }
        Ok(Model {
            args: f.args,
            loss,
            dict,
            input: f.input,
            output: f.output,
            labels,
            quantized: f.quant_input,
            sigmoid,
            tree,
        })
    }

    /// The labels as stored (`__label__en`), in the dictionary's order.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }
    pub fn args(&self) -> &Args {
        &self.args
    }
    pub fn loss(&self) -> Loss {
        self.loss
    }
    /// Whether the input matrix is product-quantized (a `.ftz`).
    pub fn quantized(&self) -> bool {
        self.quantized
    }

    /// The top `k` labels of `line` with probability at least `threshold`, best
    /// first, as fastText's `predict(line, k, threshold)`. Empty when the line has no
    /// known token, n-gram or `</s>`.
    pub fn predict(&self, line: &str, k: usize, threshold: f32) -> Vec<Prediction> {
        let mut out = Vec::new();
        self.predict_into(line.as_bytes(), k, threshold, &mut out);
        out
    }

    /// [`predict`](Model::predict) into `out` (cleared first), reusing this thread's
    /// buffers.
    pub fn predict_into(&self, line: &[u8], k: usize, threshold: f32, out: &mut Vec<Prediction>) {
        self.predict_impl(line, true, k, threshold, out)
    }

    /// A whole text as one line, its newlines read as spaces (what the well-known
    /// recipes do before calling fastText's `predict`, which refuses a `\n`).
    pub fn predict_text(&self, text: &str, k: usize, threshold: f32, out: &mut Vec<Prediction>) {
        self.predict_impl(text.as_bytes(), false, k, threshold, out)
    }

    /// The predictions of many texts ([`predict_text`](Model::predict_text)), in
    /// parallel for large batches; `None` texts give no predictions.
    pub fn predict_all(
        &self,
        texts: &[Option<&str>],
        k: usize,
        threshold: f32,
    ) -> Vec<Vec<Prediction>> {
        use rayon::prelude::*;
        let one = |t: &Option<&str>| {
            let mut out = Vec::new();
            if let Some(t) = t {
                self.predict_text(t, k, threshold, &mut out);
            }
            out
        };
        if !crate::kernels::text::worth_parallel(texts) {
            texts.iter().map(one).collect()
        } else {
            texts.par_iter().map(one).collect()
        }
    }

    fn predict_impl(
        &self,
        line: &[u8],
        newline_ends: bool,
        k: usize,
        threshold: f32,
        out: &mut Vec<Prediction>,
    ) {
        out.clear();
        if k == 0 {
            return;
        }
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            if self.hidden(line, newline_ends, s) == 0 {
                return;
            }
            s.heap.clear();
            match self.loss {
                Loss::HierarchicalSoftmax => {
                    let t = std_log(threshold);
                    self.dfs(k, t, &s.hidden, &mut s.heap, &mut s.stack);
                }
                Loss::Softmax => {
                    self.outputs(s);
                    softmax(&mut s.output);
                    k_best(k, threshold, &s.output, &mut s.heap);
                }
                Loss::OneVsAll | Loss::NegativeSampling => {
                    self.outputs(s);
                    for o in s.output.iter_mut() {
                        *o = self.sigmoid(*o);
                    }
                    k_best(k, threshold, &s.output, &mut s.heap);
                }
            }
            sort_heap(&mut s.heap);
            out.extend(s.heap.iter().map(|&Cand(score, label)| Prediction {
                label: label as u32,
                prob: score.exp(),
            }));
        })
    }

    /// The hidden vector of a line (fastText's `getLine`, `addWordNgrams`, then
    /// `computeHidden`): its input rows summed as they come, in fastText's order, a
    /// chunk at a time, then averaged. The number of rows (0: no prediction).
    fn hidden(&self, line: &[u8], newline_ends: bool, s: &mut Scratch) -> usize {
        let dim = self.args.dim as usize;
        let Scratch {
            ids,
            hashes,
            word,
            hidden,
            ..
        } = s;
        ids.clear();
        hashes.clear();
        hidden.clear();
        hidden.resize(dim, 0.0);
        let mut n = 0usize;
        {
            let mut push = |id: i32| {
                ids.push(id);
                if ids.len() == CHUNK {
                    self.add_rows(ids, hidden);
                    n += CHUNK;
                    ids.clear();
                }
            };
            let mut start = None;
            // The line as fastText's predict sees it: the text, then "\n".
            for i in 0..=line.len() {
                let c = match line.get(i) {
                    Some(b'\n') if !newline_ends => b' ',
                    Some(&c) => c,
                    None => b'\n',
                };
                if matches!(c, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c | 0) {
                    if let Some(st) = start.take()
                        && self.dict.add_token(&line[st..i], &mut push, hashes, word)
                    {
                        break;
                    }
                    if c == b'\n' {
                        self.dict.add_token(dict::EOS, &mut push, hashes, word);
                        break;
                    }
                } else if start.is_none() {
                    start = Some(i);
                }
            }
            self.dict
                .add_word_ngrams(hashes, self.args.word_ngrams, &mut push);
        }
        self.add_rows(ids, hidden);
        n += ids.len();
        if n > 0 {
            let a = (1.0 / n as f64) as f32;
            for x in hidden.iter_mut() {
                *x *= a;
            }
        }
        n
    }

    /// `hidden += ` the input rows `ids`, in order.
    fn add_rows(&self, ids: &[i32], h: &mut [f32]) {
        let dim = self.args.dim as usize;
        match &self.input {
            Matrix::Dense { data, .. } => {
                for &id in ids {
                    let row = &data[id as usize * dim..][..dim];
                    for (x, r) in h.iter_mut().zip(row) {
                        *x += r;
                    }
                }
            }
            Matrix::Quant {
                codes, pq, norm, ..
            } => {
                for &id in ids {
                    let id = id as usize;
                    let alpha = match norm {
                        Some((nc, npq)) => npq.centroid(0, nc[id])[0],
                        None => 1.0,
                    };
                    add_code(pq, h, &codes[id * pq.nsubq..][..pq.nsubq], alpha);
                }
            }
        }
    }

    fn outputs(&self, s: &mut Scratch) {
        let n = self.labels.len();
        s.output.clear();
        s.output
            .extend((0..n).map(|i| dot_row(&self.output, &s.hidden, i)));
    }

    #[inline]
    fn sigmoid(&self, x: f32) -> f32 {
        if x < -MAX_SIGMOID {
            0.0
        } else if x > MAX_SIGMOID {
            1.0
        } else {
            let i = ((x + MAX_SIGMOID) * SIGMOID_TABLE_SIZE as f32 / MAX_SIGMOID / 2.0) as i64;
            self.sigmoid[i as usize]
        }
    }

    /// fastText's `HierarchicalSoftmaxLoss::dfs`, its pruning included, with a stack
    /// of its own: a file's label counts can make the tree as deep as it has labels
    /// (equal counts), deeper than a thread's stack.
    fn dfs(
        &self,
        k: usize,
        threshold: f32,
        hidden: &[f32],
        heap: &mut Heap,
        stack: &mut Vec<(usize, f32)>,
    ) {
        stack.clear();
        stack.push((self.tree.len() - 1, 0.0f32));
        while let Some((node, score)) = stack.pop() {
            if score < threshold {
                continue;
            }
            if heap.len() == k && score < heap_min(heap) {
                continue;
            }
            let n = self.tree[node];
            if n.left == -1 && n.right == -1 {
                heap_push(heap, k, Cand(score, node as i32));
                continue;
            }
            let f = dot_row(&self.output, hidden, node - self.labels.len());
            let f = (1.0 / (1.0 + (-f).exp()) as f64) as f32;
            // Left first, as the recursion visits them.
            stack.push((n.right as usize, score + std_log(f)));
            stack.push((n.left as usize, score + std_log((1.0 - f as f64) as f32)));
        }
    }
}

/// fastText's `addcode`: `x += alpha * centroids(codes)`.
#[inline(always)]
fn add_code(pq: &Pq, x: &mut [f32], codes: &[u8], alpha: f32) {
    for (m, &code) in codes.iter().enumerate() {
        let c = pq.centroid(m, code);
        let x = &mut x[m * pq.dsub..][..c.len()];
        for (x, c) in x.iter_mut().zip(c) {
            *x += alpha * c;
        }
    }
}

/// Row `i` of `m` times `v`, summed in fastText's order.
#[inline]
fn dot_row(m: &Matrix, v: &[f32], i: usize) -> f32 {
    match m {
        Matrix::Dense { cols, data, .. } => {
            let row = &data[i * cols..][..*cols];
            let mut d = 0.0f32;
            for (a, b) in row.iter().zip(v) {
                d += a * b;
            }
            d
        }
        Matrix::Quant {
            codes, pq, norm, ..
        } => {
            let alpha = match norm {
                Some((nc, npq)) => npq.centroid(0, nc[i])[0],
                None => 1.0,
            };
            let mut res = 0.0f32;
            for (m, &code) in codes[i * pq.nsubq..][..pq.nsubq].iter().enumerate() {
                let c = pq.centroid(m, code);
                for (a, b) in c.iter().zip(&v[m * pq.dsub..]) {
                    res += b * a;
                }
            }
            res * alpha
        }
    }
}

fn softmax(out: &mut [f32]) {
    let max = out.iter().copied().fold(out[0], f32::max);
    let mut z = 0.0f32;
    for o in out.iter_mut() {
        *o = ((*o - max) as f64).exp() as f32;
        z += *o;
    }
    for o in out.iter_mut() {
        *o /= z;
    }
}

/// fastText's `findKBest`: the `k` best of `output` at or above `threshold`, as
/// `(log p, label)`.
fn k_best(k: usize, threshold: f32, output: &[f32], heap: &mut Heap) {
    for (i, &o) in output.iter().enumerate() {
        if o < threshold {
            continue;
        }
        let l = std_log(o);
        if heap.len() == k && l < heap_min(heap) {
            continue;
        }
        heap_push(heap, k, Cand(l, i as i32));
    }
}

/// A candidate label: `(log p, label)`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Cand(f32, i32);

/// fastText's heap of the `k` best: a min-heap by score kept with libstdc++'s
/// `push_heap` / `pop_heap` / `sort_heap` (fastText's `comparePairs`, a strict `>`
/// on the score), step for step. O(log k) a label, and with equal scores (the
/// one-vs-all sigmoid is a 512-entry table: ties are common) the same labels kept,
/// in the same order, as fastText.
type Heap = Vec<Cand>;

#[inline]
fn before(a: Cand, b: Cand) -> bool {
    a.0 > b.0
}

fn heap_min(heap: &Heap) -> f32 {
    heap.first().map_or(f32::INFINITY, |c| c.0)
}

/// libstdc++'s `__push_heap`.
fn sift_up(v: &mut [Cand], mut hole: usize, top: usize, value: Cand) {
    while hole > top {
        let parent = (hole - 1) / 2;
        if !before(v[parent], value) {
            break;
        }
        v[hole] = v[parent];
        hole = parent;
    }
    v[hole] = value;
}

/// libstdc++'s `__adjust_heap` from the root of `v`.
fn adjust_heap(v: &mut [Cand], value: Cand) {
    let len = v.len();
    let mut hole = 0;
    let mut second = 0;
    while second < len.saturating_sub(1) / 2 {
        second = 2 * (second + 1);
        if before(v[second], v[second - 1]) {
            second -= 1;
        }
        v[hole] = v[second];
        hole = second;
    }
    if len & 1 == 0 && len >= 2 && second == (len - 2) / 2 {
        second = 2 * (second + 1);
        v[hole] = v[second - 1];
        hole = second - 1;
    }
    sift_up(v, hole, 0, value);
}

/// libstdc++'s `pop_heap` over `v[..n]`: its top to `v[n - 1]`.
fn pop_heap(v: &mut [Cand], n: usize) {
    if n > 1 {
        let value = v[n - 1];
        v[n - 1] = v[0];
        adjust_heap(&mut v[..n - 1], value);
    }
}

/// Adds `e`, then drops the lowest when more than `k` are held (fastText's
/// push_heap, then pop_heap and pop_back).
fn heap_push(heap: &mut Heap, k: usize, e: Cand) {
    heap.push(e);
    let n = heap.len();
    sift_up(heap, n - 1, 0, e);
    if n > k {
        pop_heap(heap, n);
        heap.pop();
    }
}

/// libstdc++'s `sort_heap`: best first, ties in fastText's order.
fn sort_heap(heap: &mut Heap) {
    let mut n = heap.len();
    while n > 1 {
        pop_heap(heap, n);
        n -= 1;
    }
}

/// fastText's `HierarchicalSoftmaxLoss::buildTree` over the labels' counts (sorted
/// by decreasing count, as the dictionary stores them). The counts come from the file:
/// a count of 1e15 or more (fastText's "no node yet") would make fastText pick a node
/// not built yet (a cycle, or past the end), so a leaf is taken whenever the next node
/// is not built, and sums saturate; for real counts this is fastText's tree.
fn huffman(counts: &[i64]) -> Vec<Node> {
    let osz = counts.len();
    let n = 2 * osz - 1;
    let mut tree = vec![
        Node {
            left: -1,
            right: -1
        };
        n
    ];
    let mut count = vec![1e15 as i64; n];
    count[..osz].copy_from_slice(counts);
    let mut leaf = osz as i64 - 1;
    let mut node = osz;
    for i in osz..n {
        let mut mini = [0usize; 2];
        for m in &mut mini {
            if leaf >= 0 && (node >= i || count[leaf as usize] < count[node]) {
                *m = leaf as usize;
                leaf -= 1;
            } else {
                *m = node;
                node += 1;
            }
        }
        tree[i] = Node {
            left: mini[0] as i32,
            right: mini[1] as i32,
        };
        count[i] = count[mini[0]].saturating_add(count[mini[1]]);
    }
    tree
}

#[cfg(test)]
pub(crate) mod tests;
