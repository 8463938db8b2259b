//! Criterion benchmarks of every text kernel on one core: `cargo bench --bench kernels`
//! (or `-- html` for one group). Real pages come from ../shared/data/extraction-dev
//! when it is there (the first 200 pages), otherwise from a generated article page;
//! throughput is reported in bytes of input per second.
use std::hint::black_box;
use std::io::Read;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mdf::kernels::{html, lang, quality, text, url};

/// Real HTML pages (decoded to UTF-8), or a generated one.
fn pages() -> Vec<String> {
    let dev =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/extraction-dev/html");
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&dev) {
        let mut files: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files.into_iter().take(200) {
            let mut raw = Vec::new();
            if flate2::read::GzDecoder::new(std::fs::File::open(&f).unwrap())
                .read_to_end(&mut raw)
                .is_ok()
            {
                out.push(
                    mdf::kernels::http::decode_text(&raw, None, None)
                        .text
                        .into_owned(),
                );
            }
        }
    }
    if out.is_empty() {
        let para = "The river city council approved a plan to restore the old banks and \
                    build new paths for people who walk and cycle along the water. ";
        let body: String = (0..40)
            .map(|_| format!("<p>{}</p>\n", para.repeat(3)))
            .collect();
        out.push(format!(
            "<html><head><title>T</title><script>var x=1;</script></head><body>\
             <nav><a href=/>Home</a></nav><article>{body}</article><footer>(c)</footer></body></html>"
        ));
    }
    out
}

fn texts(pages: &[String]) -> Vec<String> {
    pages
        .iter()
        .filter_map(|p| html::extract(p, Duration::from_secs(10)).ok())
        .map(|e| e.text)
        .filter(|t| !t.is_empty())
        .collect()
}

fn bytes(xs: &[String]) -> u64 {
    xs.iter().map(|s| s.len() as u64).sum()
}

fn bench_html(c: &mut Criterion) {
    let pages = pages();
    let mut g = c.benchmark_group("html");
    g.throughput(Throughput::Bytes(bytes(&pages)));
    g.bench_function("extract", |b| {
        b.iter(|| {
            for p in &pages {
                black_box(html::extract(p, Duration::from_secs(10)).ok());
            }
        })
    });
    let raw: Vec<Vec<u8>> = pages.iter().map(|p| p.as_bytes().to_vec()).collect();
    g.bench_function("decode_text (no charset given)", |b| {
        b.iter(|| {
            for r in &raw {
                black_box(mdf::kernels::http::decode_text(r, None, None));
            }
        })
    });
    g.finish();
}

fn bench_quality(c: &mut Criterion) {
    let docs = texts(&pages());
    let mut g = c.benchmark_group("quality");
    g.throughput(Throughput::Bytes(bytes(&docs)));
    let gq = quality::GopherQuality::default();
    g.bench_function("gopher_quality", |b| {
        b.iter(|| {
            docs.iter().for_each(|d| {
                black_box(quality::gopher_quality(d, &gq));
            })
        })
    });
    let gr = quality::GopherRepetition::default();
    g.bench_function("gopher_repetition", |b| {
        b.iter(|| {
            docs.iter().for_each(|d| {
                black_box(quality::gopher_repetition(d, &gr));
            })
        })
    });
    let c4 = quality::C4::default();
    g.bench_function("c4_quality", |b| {
        b.iter(|| {
            docs.iter().for_each(|d| {
                let _ = black_box(quality::c4_quality(d, &c4, None));
            })
        })
    });
    let fw = quality::FineWeb::default();
    g.bench_function("fineweb_quality", |b| {
        b.iter(|| {
            docs.iter().for_each(|d| {
                black_box(quality::fineweb_quality(d, &fw));
            })
        })
    });
    // `words: uax29`: the spaCy-shaped Unicode word split (docs/FILTERS.md).
    let gq = quality::GopherQuality {
        words: quality::WordSplit::Uax29,
        ..quality::GopherQuality::default()
    };
    g.bench_function("gopher_quality uax29", |b| {
        b.iter(|| {
            docs.iter().for_each(|d| {
                black_box(quality::gopher_quality(d, &gq));
            })
        })
    });
    let gq = quality::GopherQuality {
        words: quality::WordSplit::Spacy,
        ..quality::GopherQuality::default()
    };
    g.bench_function("gopher_quality spacy", |b| {
        b.iter(|| {
            docs.iter().for_each(|d| {
                black_box(quality::gopher_quality(d, &gq));
            })
        })
    });
    let gr = quality::GopherRepetition {
        words: quality::WordSplit::Uax29,
        ..quality::GopherRepetition::default()
    };
    g.bench_function("gopher_repetition uax29", |b| {
        b.iter(|| {
            docs.iter().for_each(|d| {
                black_box(quality::gopher_repetition(d, &gr));
            })
        })
    });
    g.bench_function("language id", |b| {
        b.iter(|| {
            docs.iter().for_each(|d| {
                black_box(lang::identify(d));
            })
        })
    });
    let refs: Vec<Option<&str>> = docs.iter().map(|d| Some(d.as_str())).collect();
    let norm = text::Normalise {
        lowercase: true,
        collapse_whitespace: true,
    };
    g.bench_function("content hash (normalised)", |b| {
        b.iter(|| {
            for t in &refs {
                black_box(text::content_hashes(&[*t], norm));
            }
        })
    });
    let mh = mdf::kernels::minhash::MinHasher::default_params();
    g.bench_function("minhash signature + 14 band keys", |b| {
        b.iter(|| {
            for d in &docs {
                black_box(mh.band_keys(&mh.signature(d)));
            }
        })
    });
    g.bench_function("pii_redact", |b| {
        b.iter(|| {
            docs.iter().for_each(|d| {
                black_box(mdf::ops::pii_redact::redact(
                    d,
                    Some("e@x"),
                    Some("0.0.0.0"),
                ));
            })
        })
    });
    g.finish();
}

fn bench_url(c: &mut Criterion) {
    // 200k listed domains (deterministic pseudo-random), 100k URLs, 10% listed.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut bl = url::UrlBlocklist::new(3);
    let domains: Vec<String> = (0..200_000).map(|_| format!("d{:x}.com", next())).collect();
    for d in &domains {
        bl.add_domain(d);
    }
    bl.seal();
    let urls: Vec<String> = (0..100_000)
        .map(|i| {
            if i % 10 == 0 {
                format!("https://www.{}/page/{i}", domains[i % domains.len()])
            } else {
                format!(
                    "https://site{:x}.org/articles/{i}?ref=home",
                    next() % 50_000
                )
            }
        })
        .collect();
    let refs: Vec<Option<&str>> = urls.iter().map(|u| Some(u.as_str())).collect();
    let mut g = c.benchmark_group("url");
    g.throughput(Throughput::Elements(urls.len() as u64));
    g.bench_function("url_filter domains (100k URLs)", |b| {
        b.iter(|| black_box(bl.check_serial(&refs)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(3));
    targets = bench_html, bench_quality, bench_url
}
criterion_main!(benches);
