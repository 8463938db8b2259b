//! Main-text extraction and the metadata scan on arbitrary bytes (decoded as the WARC
//! reader decodes them): never panic, extraction returns within its CPU budget.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, Instant};

fuzz_target!(|data: &[u8]| {
    let text = mdf::kernels::http::decode_text(data, None, None).text;
    let t = Instant::now();
    let _ = mdf::kernels::html::extract(&text, Duration::from_millis(200));
    assert!(t.elapsed() < Duration::from_secs(2), "the CPU budget was not honoured");
    let _ = mdf::kernels::html::decode_entities(&text);
    let _ = mdf::kernels::html::metadata(&text, Some("https://e.com/2008/01/16/x"));
});
