//! Reading a fastText `.bin` / `.ftz` file (format version 12, and 11 as fastText
//! reads it) into its parts: the args header, the dictionary, the input and output
//! matrices (dense, or product-quantized with an optional quantized norm). Every
//! length is checked against the bytes left before anything is allocated, so a
//! malformed or truncated file is an error naming the field, never a panic.
use super::FastTextError;

/// fastText's file magic (`FASTTEXT_FILEFORMAT_MAGIC_INT32`).
pub const MAGIC: i32 = 793_712_314;
/// The newest format version fastText writes (0.9.x).
pub const VERSION: i32 = 12;

/// The training arguments fastText stores in the header, in its order.
#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    pub dim: i32,
    pub ws: i32,
    pub epoch: i32,
    pub min_count: i32,
    pub neg: i32,
    pub word_ngrams: i32,
    /// 1 hs, 2 ns, 3 softmax, 4 ova.
    pub loss: i32,
    /// 1 cbow, 2 skipgram, 3 supervised.
    pub model: i32,
    pub bucket: i32,
    pub minn: i32,
    pub maxn: i32,
    pub lr_update_rate: i32,
    pub t: f64,
}

/// One dictionary entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub word: Vec<u8>,
    pub count: i64,
    /// 0 word, 1 label.
    pub kind: i8,
}

/// A product quantizer: `nsubq` sub-vectors of `dsub` floats (the last `lastdsub`),
/// 256 centroids each.
#[derive(Debug, Clone)]
pub struct Pq {
    pub dim: usize,
    pub nsubq: usize,
    pub dsub: usize,
    pub lastdsub: usize,
    pub centroids: Vec<f32>,
}

pub const KSUB: usize = 256;

impl Pq {
    /// The centroid `i` of sub-quantizer `m` (fastText's `get_centroids`).
    #[inline(always)]
    pub fn centroid(&self, m: usize, i: u8) -> &[f32] {
        let i = i as usize;
        if m == self.nsubq - 1 {
            let at = m * KSUB * self.dsub + i * self.lastdsub;
            &self.centroids[at..at + self.lastdsub]
        } else {
            let at = (m * KSUB + i) * self.dsub;
            &self.centroids[at..at + self.dsub]
        }
    }
}

/// A matrix of `rows` x `cols` floats as stored.
#[derive(Debug, Clone)]
pub enum Matrix {
    Dense {
        rows: usize,
        cols: usize,
        data: Vec<f32>,
    },
    Quant {
        rows: usize,
        cols: usize,
        codes: Vec<u8>,
        pq: Pq,
        /// The per-row norm codes and their quantizer (`qnorm`).
        norm: Option<(Vec<u8>, Pq)>,
    },
}

impl Matrix {
    pub fn rows(&self) -> usize {
        match self {
            Matrix::Dense { rows, .. } | Matrix::Quant { rows, .. } => *rows,
        }
    }
    pub fn cols(&self) -> usize {
        match self {
            Matrix::Dense { cols, .. } | Matrix::Quant { cols, .. } => *cols,
        }
    }
}

/// The parts of a model file.
pub struct File {
    pub args: Args,
    pub nwords: usize,
    pub nlabels: usize,
    pub entries: Vec<Entry>,
    /// `pruneidx`: `None` when the dictionary is not pruned (size -1).
    pub prune: Option<Vec<(i32, i32)>>,
    pub input: Matrix,
    pub quant_input: bool,
    pub output: Matrix,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], FastTextError> {
        if self.bytes.len() - self.at < n {
            return Err(FastTextError::Truncated {
                field: what,
                offset: self.at,
            });
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, FastTextError> {
        Ok(self.take(1, what)?[0])
    }
    fn i32(&mut self, what: &'static str) -> Result<i32, FastTextError> {
        let b = self.take(4, what)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self, what: &'static str) -> Result<i64, FastTextError> {
        let b = self.take(8, what)?;
        Ok(i64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    fn f64(&mut self, what: &'static str) -> Result<f64, FastTextError> {
        Ok(f64::from_bits(self.i64(what)? as u64))
    }
    /// `n` little-endian floats, checked against the bytes left first.
    fn f32s(&mut self, n: usize, what: &'static str) -> Result<Vec<f32>, FastTextError> {
        let len = n
            .checked_mul(4)
            .ok_or_else(|| invalid(format!("{what}: {n} floats overflow")))?;
        let b = self.take(len, what)?;
        Ok(b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
    fn bool(&mut self, what: &'static str) -> Result<bool, FastTextError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(invalid(format!("{what}: {v} is not a boolean"))),
        }
    }
}

fn invalid(message: String) -> FastTextError {
    FastTextError::Invalid(message)
}

fn count(v: i64, what: &str) -> Result<usize, FastTextError> {
    usize::try_from(v).map_err(|_| invalid(format!("{what}: {v} is negative")))
}

/// Parses a whole model file.
pub fn parse(bytes: &[u8]) -> Result<File, FastTextError> {
    let mut c = Cursor { bytes, at: 0 };
    let magic = c.i32("magic")?;
    if magic != MAGIC {
        return Err(FastTextError::Magic(magic as u32));
    }
    let version = c.i32("version")?;
    if !(11..=VERSION).contains(&version) {
        return Err(FastTextError::Version(version));
    }
    let mut args = Args {
        dim: c.i32("args.dim")?,
        ws: c.i32("args.ws")?,
        epoch: c.i32("args.epoch")?,
        min_count: c.i32("args.minCount")?,
        neg: c.i32("args.neg")?,
        word_ngrams: c.i32("args.wordNgrams")?,
        loss: c.i32("args.loss")?,
        model: c.i32("args.model")?,
        bucket: c.i32("args.bucket")?,
        minn: c.i32("args.minn")?,
        maxn: c.i32("args.maxn")?,
        lr_update_rate: c.i32("args.lrUpdateRate")?,
        t: c.f64("args.t")?,
    };
    // fastText's backward compatibility: version 11 supervised models had no char
    // n-grams.
    if version == 11 && args.model == 3 {
        args.maxn = 0;
    }
    // Refused from the header, before the matrices: a word-vector model (cc.en.300.bin)
    // would otherwise be read whole (gigabytes of floats) only to be refused.
    if args.model != 3 {
        return Err(FastTextError::Unsupported(format!(
            "an unsupervised model (args.model {}); only supervised classifiers predict labels",
            args.model
        )));
    }
    if args.dim <= 0 {
        return Err(invalid(format!("args.dim: {} is not positive", args.dim)));
    }
    if args.bucket < 0 {
        return Err(invalid(format!("args.bucket: {} is negative", args.bucket)));
    }

    let size = count(c.i32("dictionary size")? as i64, "dictionary size")?;
    let nwords = count(c.i32("dictionary nwords")? as i64, "dictionary nwords")?;
    let nlabels = count(c.i32("dictionary nlabels")? as i64, "dictionary nlabels")?;
    let _ntokens = c.i64("dictionary ntokens")?;
    let prune_size = c.i64("dictionary pruneidx_size")?;
    if nwords.checked_add(nlabels) != Some(size) {
        return Err(invalid(format!(
            "dictionary: {nwords} words and {nlabels} labels but {size} entries"
        )));
    }
    // Each entry takes at least 10 bytes (NUL, count, type).
    if size > c.left() / 10 {
        return Err(FastTextError::Truncated {
            field: "dictionary entries",
            offset: c.at,
        });
    }
    let mut entries = Vec::with_capacity(size);
    for i in 0..size {
        let rest = &c.bytes[c.at..];
        let Some(end) = rest.iter().position(|&b| b == 0) else {
            return Err(FastTextError::Truncated {
                field: "dictionary word",
                offset: c.at,
            });
        };
        let word = c.take(end + 1, "dictionary word")?[..end].to_vec();
        let count = c.i64("dictionary entry count")?;
        let kind = c.u8("dictionary entry type")? as i8;
        let want = i8::from(i >= nwords);
        if kind != want {
            return Err(invalid(format!(
                "dictionary entry {i}: type {kind}, expected {want} (words first, then labels)"
            )));
        }
        entries.push(Entry { word, count, kind });
    }
    let prune = if prune_size < 0 {
        None
    } else {
        let n = count(prune_size, "dictionary pruneidx_size")?;
        if n > c.left() / 8 {
            return Err(FastTextError::Truncated {
                field: "dictionary pruneidx",
                offset: c.at,
            });
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push((c.i32("pruneidx key")?, c.i32("pruneidx value")?));
        }
        Some(v)
    };

    let quant_input = c.bool("quant_input")?;
    let input = if quant_input {
        quant_matrix(&mut c, "input")?
    } else {
        dense_matrix(&mut c, "input")?
    };
    if !quant_input && prune.is_some() {
        return Err(invalid(
            "a pruned dictionary needs a quantized input matrix".into(),
        ));
    }
    let qout = c.bool("qout")?;
    let output = if quant_input && qout {
        quant_matrix(&mut c, "output")?
    } else {
        dense_matrix(&mut c, "output")?
    };
    if c.left() != 0 {
        return Err(invalid(format!(
            "{} bytes after the output matrix",
            c.left()
        )));
    }
    Ok(File {
        args,
        nwords,
        nlabels,
        entries,
        prune,
        input,
        quant_input,
        output,
    })
}

fn dense_matrix(c: &mut Cursor, what: &'static str) -> Result<Matrix, FastTextError> {
    let rows = count(c.i64("matrix rows")?, "matrix rows")?;
    let cols = count(c.i64("matrix cols")?, "matrix cols")?;
    let n = rows
        .checked_mul(cols)
        .ok_or_else(|| invalid(format!("{what} matrix: {rows} x {cols} overflows")))?;
    let data = c.f32s(n, what)?;
    Ok(Matrix::Dense { rows, cols, data })
}

fn read_pq(c: &mut Cursor, what: &'static str) -> Result<Pq, FastTextError> {
    let dim = count(c.i32("pq dim")? as i64, "pq dim")?;
    let nsubq = count(c.i32("pq nsubq")? as i64, "pq nsubq")?;
    let dsub = count(c.i32("pq dsub")? as i64, "pq dsub")?;
    let lastdsub = count(c.i32("pq lastdsub")? as i64, "pq lastdsub")?;
    if nsubq == 0
        || dsub == 0
        || lastdsub == 0
        || dsub
            .checked_mul(nsubq - 1)
            .and_then(|x| x.checked_add(lastdsub))
            != Some(dim)
    {
        return Err(invalid(format!(
            "{what} quantizer: dim {dim}, {nsubq} sub-quantizers of {dsub} (last {lastdsub}) do not add up"
        )));
    }
    let n = dim
        .checked_mul(KSUB)
        .ok_or_else(|| invalid(format!("{what} quantizer: dim {dim} overflows")))?;
    let centroids = c.f32s(n, what)?;
    Ok(Pq {
        dim,
        nsubq,
        dsub,
        lastdsub,
        centroids,
    })
}

fn quant_matrix(c: &mut Cursor, what: &'static str) -> Result<Matrix, FastTextError> {
    let qnorm = c.bool("qnorm")?;
    let rows = count(c.i64("matrix rows")?, "matrix rows")?;
    let cols = count(c.i64("matrix cols")?, "matrix cols")?;
    let codesize = count(c.i32("codesize")? as i64, "codesize")?;
    let codes = c.take(codesize, "codes")?.to_vec();
    let pq = read_pq(c, what)?;
    if pq.dim != cols || rows.checked_mul(pq.nsubq) != Some(codesize) {
        return Err(invalid(format!(
            "{what} matrix: {rows} x {cols} with {codesize} codes does not fit its quantizer (dim {}, {} sub-quantizers)",
            pq.dim, pq.nsubq
        )));
    }
    let norm = if qnorm {
        let codes = c.take(rows, "norm codes")?.to_vec();
        let npq = read_pq(c, what)?;
        Some((codes, npq))
    } else {
        None
    };
    Ok(Matrix::Quant {
        rows,
        cols,
        codes,
        pq,
        norm,
    })
}
