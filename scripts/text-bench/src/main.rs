//! Release-build throughput of mdf's `tokenize` and `text_model` kernels (the same
//! source files, included by path) without mdf's 17-minute release build; per core:
//! run with `TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1` (ONNX Runtime gets one
//! intra-op thread), and time is the process's CPU time. docs/PERFORMANCE.md says how.
//!
//!   text-bench tokenize CORPUS.jsonl TOKENIZER.json...
//!   text-bench model CORPUS.jsonl LIBONNXRUNTIME MODEL.onnx TOKENIZER.json MAX_LEN BATCH [N]
#[allow(dead_code)]
#[path = "../../../src/kernels/encoder.rs"]
mod encoder;
// The operators use more of these kernels than the bench does.
#[allow(dead_code)]
#[path = "../../../src/kernels/hf_tokenizer.rs"]
mod hf_tokenizer;
/// Seconds of CPU this process has used (all threads): per-core throughput stays
/// meaningful on a machine shared with other builds.
fn cpu() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

struct Instant(f64);
impl Instant {
    fn now() -> Instant {
        Instant(cpu())
    }
    fn elapsed(&self) -> Dur {
        Dur(cpu() - self.0)
    }
}
struct Dur(f64);
impl Dur {
    fn as_secs_f64(&self) -> f64 {
        self.0
    }
}

fn texts(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["text"].as_str().unwrap().to_string()
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let t = texts(&args[2]);
    let refs: Vec<&str> = t.iter().map(|s| s.as_str()).collect();
    let bytes: usize = refs.iter().map(|s| s.len()).sum();
    match args[1].as_str() {
        "tokenize" => {
            for tok in &args[3..] {
                let tk = hf_tokenizer::Tokenizer::from_bytes(&std::fs::read(tok).unwrap()).unwrap();
                let mut best = f64::MAX;
                let mut n = 0u64;
                for _ in 0..3 {
                    let t0 = Instant::now();
                    n = 0;
                    for c in refs.chunks(1024) {
                        n += tk
                            .counts(c, false)
                            .unwrap()
                            .iter()
                            .map(|&x| x as u64)
                            .sum::<u64>();
                    }
                    best = best.min(t0.elapsed().as_secs_f64());
                }
                println!(
                    "{tok}: {} texts, {} tokens, {:.2} MB: {:.0} records/s, {:.0} tokens/s, {:.1} MB/s",
                    refs.len(),
                    n,
                    bytes as f64 / 1e6,
                    refs.len() as f64 / best,
                    n as f64 / best,
                    bytes as f64 / 1e6 / best
                );
            }
        }
        "model" => {
            let (lib, model, tok, max_len, batch) = (
                &args[3],
                &args[4],
                &args[5],
                args[6].parse().unwrap(),
                args[7].parse().unwrap(),
            );
            let env = ort::init_from(lib).unwrap().with_name("b").build().unwrap();
            let mut s = ort::session::Session::builder(&env)
                .unwrap()
                .with_intra_threads(1)
                .unwrap()
                .commit_from_file(model)
                .unwrap();
            let has_types = s.inputs().iter().any(|i| i.name() == "token_type_ids");
            let tk = hf_tokenizer::Tokenizer::from_bytes(&std::fs::read(tok).unwrap())
                .unwrap()
                .truncating(max_len)
                .unwrap();
            let n = refs.len().min(
                args.get(8)
                    .map(|x| x.parse().unwrap())
                    .unwrap_or(usize::MAX),
            );
            let refs = &refs[..n];
            let t0 = Instant::now();
            let bs = tk.padded_batches(refs, batch, 0).unwrap();
            let t_tok = t0.elapsed().as_secs_f64();
            let mut tokens = 0usize;
            let mut padded = 0usize;
            let t1 = Instant::now();
            for b in bs {
                tokens += b.mask.iter().filter(|&&m| m == 1).count();
                padded += b.rows * b.len;
                let sh = vec![b.rows, b.len];
                let mask = b.mask.clone();
                let mut feeds: Vec<(String, ort::value::DynValue)> = vec![
                    (
                        "input_ids".into(),
                        ort::value::Tensor::from_array((sh.clone(), b.ids))
                            .unwrap()
                            .into_dyn(),
                    ),
                    (
                        "attention_mask".into(),
                        ort::value::Tensor::from_array((sh.clone(), b.mask))
                            .unwrap()
                            .into_dyn(),
                    ),
                ];
                if has_types {
                    feeds.push((
                        "token_type_ids".into(),
                        ort::value::Tensor::from_array((sh.clone(), b.type_ids))
                            .unwrap()
                            .into_dyn(),
                    ));
                }
                let out = s.run(feeds).unwrap();
                let (shape, v) = out[0].try_extract_tensor::<f32>().unwrap();
                if shape.len() == 3 {
                    let h = shape[2] as usize;
                    std::hint::black_box(encoder::pool(
                        v,
                        &mask,
                        b.rows,
                        b.len,
                        h,
                        encoder::Pooling::Mean,
                    ));
                }
            }
            let t_model = t1.elapsed().as_secs_f64();
            let all = t_tok + t_model;
            println!(
                "{model} max_length {max_len} batch {batch}: {n} texts, {tokens} tokens ({padded} with padding): {:.1} records/s ({:.0} tokens/s); tokenizing {:.1}% of the time",
                n as f64 / all,
                tokens as f64 / all,
                100.0 * t_tok / all
            );
        }
        _ => panic!(),
    }
}
