//! One gzip member at a time, decompressed whole by libdeflate: about twice the speed
//! of streaming inflate (zlib-rs) on CommonCrawl's one-member-per-record WARCs
//! (docs/DECISIONS.md). The caller supplies the whole member (or more) and an output
//! buffer; the result says how many input bytes the member used, so the next member
//! follows. Streams and members too large to hold stay with flate2.
use libdeflate_sys as sys;

/// Why a member did not decompress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InflateError {
    /// Corrupt data, or a member that does not end within the input given.
    BadData,
    /// The member inflates to more than the output buffer holds.
    OutputFull,
}

/// A libdeflate decompressor (not shared between threads; cheap to keep per reader).
pub struct GzipMembers {
    d: std::ptr::NonNull<sys::libdeflate_decompressor>,
}

// The decompressor is plain heap state with no thread affinity; `&mut self` on every
// use keeps it to one thread at a time.
unsafe impl Send for GzipMembers {}

impl GzipMembers {
    pub fn new() -> GzipMembers {
        // SAFETY: allocation has no preconditions; a null return means out of memory.
        let p = unsafe { sys::libdeflate_alloc_decompressor() };
        GzipMembers {
            d: std::ptr::NonNull::new(p).expect("libdeflate: out of memory"),
        }
    }

    /// Decompresses the gzip member at the start of `input` into `out`:
    /// (input bytes the member used, bytes written). CRC32 and length are checked.
    pub fn member(&mut self, input: &[u8], out: &mut [u8]) -> Result<(usize, usize), InflateError> {
        let (mut used, mut written) = (0usize, 0usize);
        // SAFETY: the pointers and lengths describe live slices; libdeflate writes at
        // most `out.len()` bytes to `out` and reads at most `input.len()` from `input`.
        let r = unsafe {
            sys::libdeflate_gzip_decompress_ex(
                self.d.as_ptr(),
                input.as_ptr().cast(),
                input.len(),
                out.as_mut_ptr().cast(),
                out.len(),
                &mut used,
                &mut written,
            )
        };
        match r {
            sys::libdeflate_result_LIBDEFLATE_SUCCESS => Ok((used, written)),
            sys::libdeflate_result_LIBDEFLATE_INSUFFICIENT_SPACE => Err(InflateError::OutputFull),
            _ => Err(InflateError::BadData),
        }
    }
}

impl Default for GzipMembers {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for GzipMembers {
    fn drop(&mut self) {
        // SAFETY: allocated by libdeflate_alloc_decompressor, freed once.
        unsafe { sys::libdeflate_free_decompressor(self.d.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn members_follow_one_another_and_errors_are_told_apart() {
        let a = b"WARC/1.0\r\nfirst record".repeat(50);
        let b = b"second".to_vec();
        let mut file = gz(&a);
        let first_len = file.len();
        file.extend(gz(&b));
        let mut d = GzipMembers::new();
        let mut out = vec![0u8; 4096];
        let (used, n) = d.member(&file, &mut out).unwrap();
        assert_eq!((used, &out[..n]), (first_len, &a[..]));
        let (used2, n) = d.member(&file[used..], &mut out).unwrap();
        assert_eq!((used + used2, &out[..n]), (file.len(), &b[..]));
        // Too small an output buffer, a member cut short, a flipped byte.
        assert_eq!(
            d.member(&file, &mut out[..100]),
            Err(InflateError::OutputFull)
        );
        assert_eq!(
            d.member(&file[..first_len - 5], &mut out),
            Err(InflateError::BadData)
        );
        let mut bad = file.clone();
        bad[first_len - 6] ^= 0xff; // inside the CRC32
        assert_eq!(d.member(&bad, &mut out), Err(InflateError::BadData));
        assert_eq!(d.member(b"not gzip", &mut out), Err(InflateError::BadData));
        assert_eq!(d.member(b"", &mut out), Err(InflateError::BadData));
    }
}
