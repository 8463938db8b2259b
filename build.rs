//! Trains the language identifier on its bundled corpora and writes the tables the
//! binary embeds (`$OUT_DIR/langid.bin`, read in place by `kernels::lang`): each
//! process used to spend ~0.1 s of CPU and ~20 MB of fresh pages training at start-up.
use std::io::Read;
use std::sync::OnceLock;

#[path = "src/kernels/langid/model.rs"]
mod model;

fn letter_bitmap() -> &'static [u8] {
    static B: OnceLock<Vec<u8>> = OnceLock::new();
    B.get_or_init(model::compute_letter_bitmap)
}

fn main() {
    for f in [
        "build.rs",
        "src/kernels/langid/model.rs",
        "src/kernels/langid/udhr.tsv.gz",
        "src/kernels/langid/lingua.tsv.gz",
    ] {
        println!("cargo::rerun-if-changed={f}");
    }
    let read = |path: &str| {
        let gz = std::fs::read(path).expect("a langid corpus");
        let mut corpus = String::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_string(&mut corpus)
            .expect("the bundled langid corpora are valid gzip");
        corpus
    };
    let udhr = read("src/kernels/langid/udhr.tsv.gz");
    let lingua = read("src/kernels/langid/lingua.tsv.gz");
    let tables = model::encode(&model::train(&udhr, &lingua), letter_bitmap());
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("langid.bin"), tables).expect("writing langid.bin");
}
