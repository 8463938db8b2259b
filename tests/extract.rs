//! Main-text extraction quality on real pages (../shared/data/extraction-dev, the
//! trafilatura evaluation set, 990 pages): a regression floor just under trafilatura's
//! own 0.926 on the same pages (mdf: 0.930). Speed is measured with
//! `mdf bench extract` (docs/PERFORMANCE.md).
#[test]
fn snippet_f1_on_real_pages() {
    let dev =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/extraction-dev");
    assert!(dev.is_dir(), "missing test data: {}", dev.display());
    let r = mdf::bench::extract_quality(&dev, usize::MAX).unwrap();
    assert_eq!(r.pages, 990);
    assert!(
        r.f1 >= 0.925,
        "F1 {:.3} (precision {:.3}, recall {:.3})",
        r.f1,
        r.precision,
        r.recall
    );
}
