//! A reduced-scale decoder for the JPEGs that make up most of the web: baseline (and
//! extended) Huffman, 8-bit, one interleaved scan of grey or YCbCr/RGB. It produces
//! what `jpeg-decoder`'s scaled decode (`Decoder::scale`) produces, byte for byte
//! (the same reduced IDCTs, chroma upsampling and colour conversion), in a fraction of
//! the time: at 1/8 scale a block needs only its DC coefficient, at 1/4 four
//! coefficients, at 1/2 sixteen, so the entropy decoder reads the values of those and
//! only skips over the rest (no dezigzag, no dequantisation, no 8×8 IDCT), with a
//! 64-bit bit buffer refilled eight bytes at a time.
//!
//! Anything outside that case (progressive or arithmetic coding, 12-bit samples,
//! CMYK, several scans, restart markers out of order, a scan that runs past its data)
//! returns `None` so the caller decodes with the general decoder: this module never
//! decides an image is broken, it only declines.

use std::rc::Rc;

/// Zigzag index → natural (row-major) index.
const UNZIGZAG: [u8; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

/// Bits looked up at once; longer codes take the slow path.
const LUT_BITS: u32 = 9;

#[derive(Clone)]
struct Huffman {
    /// Per `LUT_BITS` prefix: code length (0: longer or invalid) and symbol.
    lut: Box<[(u8, u8); 1 << LUT_BITS]>,
    /// Per length 1..=16 (index len-1): the largest code, -1 if none.
    maxcode: [i32; 16],
    /// Per length: index of its first symbol minus its first code.
    delta: [i32; 16],
    values: Vec<u8>,
    /// For reading past AC coefficients, per `LUT_BITS` prefix: the bits of code and
    /// value together (bits 0–4), how far the zigzag index advances (run + 1, or 16
    /// for ZRL; bits 5–9), and [`EOB`]. 0: a code longer than the prefix.
    skip: Box<[u16; 1 << LUT_BITS]>,
    /// The table's definition (counts, then symbols): its identity in [`MULTI_CACHE`],
    /// compared whole (a hash could collide, and the cached table would be wrong).
    key: Vec<u8>,
}

/// [`Huffman::skip`]: the end of the block.
const EOB: u16 = 1 << 15;

/// Bits looked at once when reading past several AC symbols.
const MULTI_BITS: u32 = 12;
/// A [`Huffman::multi`] entry not computed yet.
const UNSET: u16 = 0;
/// A [`Huffman::multi`] entry whose first symbol does not fit: one at a time.
const SINGLE: u16 = 0x7FFF;

impl Huffman {
    /// As many whole AC symbols (code and value) as the `MULTI_BITS`-bit prefix `p`
    /// holds, stopping after an end of block: their bits (0–3), how far they advance
    /// the zigzag index (4–10) and [`EOB`]; [`SINGLE`] if the first does not fit.
    fn multi(&self, p: usize) -> u16 {
        let (mut pos, mut adv) = (0u32, 0u32);
        let mut eob = 0;
        while pos < MULTI_BITS {
            let window = (p << pos) & ((1 << MULTI_BITS) - 1);
            let (len, rs) = self.lut[window >> (MULTI_BITS - LUT_BITS)];
            let (len, r, s) = (len as u32, (rs >> 4) as u32, (rs & 15) as u32);
            if len == 0 || len + s > MULTI_BITS - pos {
                break;
            }
            match (r, s) {
                (0, 0) => {
                    pos += len;
                    eob = EOB;
                    break;
                }
                (_, 0) if r != 15 => break,
                _ => {
                    let a = if s == 0 { 16 } else { r + 1 };
                    if adv + a > 127 {
                        break;
                    }
                    adv += a;
                    pos += len + s;
                }
            }
        }
        if pos == 0 {
            SINGLE
        } else {
            pos as u16 | (adv as u16) << 4 | eob
        }
    }
}

impl Huffman {
    /// The canonical code of a DHT table (JPEG Annex C); `None` if over-subscribed.
    fn new(counts: &[u8; 16], values: &[u8]) -> Option<Huffman> {
        let mut lut = Box::new([(0u8, 0u8); 1 << LUT_BITS]);
        let mut maxcode = [-1i32; 16];
        let mut delta = [0i32; 16];
        let mut code = 0u32;
        let mut k = 0usize;
        for len in 1..=16u32 {
            let n = counts[len as usize - 1] as usize;
            if n > 0 {
                delta[len as usize - 1] = k as i32 - code as i32;
                for _ in 0..n {
                    if code >= 1 << len {
                        return None;
                    }
                    let sym = *values.get(k)?;
                    if len <= LUT_BITS {
                        let shift = LUT_BITS - len;
                        for fill in 0..1u32 << shift {
                            lut[((code << shift) | fill) as usize] = (len as u8, sym);
                        }
                    }
                    code += 1;
                    k += 1;
                }
                maxcode[len as usize - 1] = code as i32 - 1;
            }
            code <<= 1;
        }
        let mut skip = Box::new([0u16; 1 << LUT_BITS]);
        for (e, &(len, rs)) in skip.iter_mut().zip(lut.iter()) {
            if len > 0 {
                let (r, s) = ((rs >> 4) as u16, (rs & 15) as u16);
                *e = match (r, s) {
                    (0, 0) => len as u16 | EOB,
                    (15, 0) => len as u16 | 16 << 5,
                    (_, 0) => 0, // an end-of-band run: left to the slow path
                    _ => (len as u16 + s) | (r + 1) << 5,
                };
            }
        }
        Some(Huffman {
            lut,
            maxcode,
            delta,
            values: values[..k].to_vec(),
            skip,
            key: [&counts[..], &values[..k]].concat(),
        })
    }
}

/// The entropy-coded bytes of a scan, as bits, MSB first. A marker ends the data:
/// from there zeros are fed (as libjpeg and jpeg-decoder do) and `overrun` is set
/// as soon as one of them is consumed.
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
    buf: u64,
    /// Bits in `buf`, real and fed zeros.
    n: u32,
    /// Of those, zeros fed after a marker.
    fed: u32,
    /// Position of the marker (its 0xFF) that ended the data.
    marker: Option<usize>,
}

impl<'a> Bits<'a> {
    fn new(data: &'a [u8], pos: usize) -> Self {
        Bits {
            data,
            pos,
            buf: 0,
            n: 0,
            fed: 0,
            marker: None,
        }
    }

    #[inline]
    fn refill(&mut self) {
        // Fast path: eight bytes without 0xFF need no unstuffing.
        if self.marker.is_none() && self.n <= 56 && self.pos + 8 <= self.data.len() {
            let w = u64::from_be_bytes(self.data[self.pos..self.pos + 8].try_into().unwrap());
            let inv = !w;
            let has_ff = inv.wrapping_sub(0x0101_0101_0101_0101) & !inv & 0x8080_8080_8080_8080;
            if has_ff == 0 {
                let take = (64 - self.n) / 8; // whole bytes that fit
                self.buf |= (w >> (64 - 8 * take)) << (64 - self.n - 8 * take);
                self.n += 8 * take;
                self.pos += take as usize;
                return;
            }
        }
        while self.n <= 56 {
            let byte = match self.marker {
                Some(_) => {
                    self.fed += 8;
                    0
                }
                None => match self.data.get(self.pos) {
                    None => {
                        // No marker before the end: fed zeros, marker at the end.
                        self.marker = Some(self.data.len());
                        self.fed += 8;
                        0
                    }
                    Some(&0xFF) => match self.data.get(self.pos + 1) {
                        Some(0x00) => {
                            self.pos += 2;
                            0xFF
                        }
                        _ => {
                            self.marker = Some(self.pos);
                            self.fed += 8;
                            0
                        }
                    },
                    Some(&b) => {
                        self.pos += 1;
                        b
                    }
                },
            };
            self.buf |= (byte as u64) << (56 - self.n);
            self.n += 8;
        }
    }

    /// Makes at least 32 bits available.
    #[inline(always)]
    fn need(&mut self) {
        if self.n < 32 {
            self.refill();
        }
    }

    #[inline(always)]
    fn consume(&mut self, k: u32) {
        self.buf <<= k;
        self.n -= k;
    }

    /// True once a fed zero has been consumed: the scan ran past its data.
    #[inline]
    fn overrun(&self) -> bool {
        self.n < self.fed
    }

    /// One Huffman symbol (needs ≥ 16 bits available).
    #[inline(always)]
    fn symbol(&mut self, h: &Huffman) -> Option<u8> {
        let (len, sym) = h.lut[(self.buf >> (64 - LUT_BITS)) as usize];
        if len > 0 {
            self.consume(len as u32);
            return Some(sym);
        }
        let peek = (self.buf >> 48) as i32;
        for len in LUT_BITS + 1..=16 {
            let code = peek >> (16 - len);
            if code <= h.maxcode[len as usize - 1] {
                self.consume(len);
                return h
                    .values
                    .get((code + h.delta[len as usize - 1]) as usize)
                    .copied();
            }
        }
        None
    }

    /// `s` raw bits (s ≤ 16, available), sign-extended as JPEG's EXTEND.
    #[inline(always)]
    fn extend(&mut self, s: u32) -> i16 {
        if s == 0 {
            return 0;
        }
        let v = (self.buf >> (64 - s)) as i32;
        self.consume(s);
        (if v < 1 << (s - 1) {
            v - (1 << s) + 1
        } else {
            v
        }) as i16
    }

    /// At the end of an interval or scan: drops the padding bits and moves past the
    /// marker that must follow, which is returned. `None` if data is left before it.
    fn take_marker(&mut self) -> Option<u8> {
        if self.n - self.fed >= 8 {
            return None;
        }
        let at = match self.marker {
            Some(at) => at,
            None if self.data.get(self.pos) == Some(&0xFF)
                && self.data.get(self.pos + 1).is_some_and(|&b| b != 0) =>
            {
                self.pos
            }
            None => return None,
        };
        let mut i = at;
        while self.data.get(i) == Some(&0xFF) {
            i += 1;
        }
        let m = *self.data.get(i)?;
        self.pos = i + 1;
        self.buf = 0;
        self.n = 0;
        self.fed = 0;
        self.marker = None;
        Some(m)
    }
}

#[derive(Clone, Copy)]
struct Component {
    id: u8,
    h: u32,
    v: u32,
    tq: usize,
}

/// What the headers of a supported JPEG say, up to its scan.
pub struct Jpeg<'a> {
    data: &'a [u8],
    pub width: u32,
    pub height: u32,
    comps: Vec<Component>,
    /// Per scan component (frame order is checked equal): DC and AC table.
    tables: Vec<(usize, usize)>,
    dc: [Option<Rc<Huffman>>; 4],
    ac: [Option<Rc<Huffman>>; 4],
    qt: [[u16; 64]; 4],
    restart: u32,
    rgb: bool,
    /// The last APP1 `Exif\0\0` payload, from its TIFF header.
    pub exif: Option<&'a [u8]>,
    scan_start: usize,
}

impl<'a> Jpeg<'a> {
    /// Grey (1 component) or colour (3).
    pub fn components(&self) -> usize {
        self.comps.len()
    }

    /// Reads the headers up to the first scan. `None`: not a JPEG this module takes.
    pub fn parse(data: &'a [u8]) -> Option<Jpeg<'a>> {
        if data.get(..2)? != [0xFF, 0xD8] {
            return None;
        }
        let mut i = 2;
        let mut dc: [Option<Rc<Huffman>>; 4] = Default::default();
        let mut ac: [Option<Rc<Huffman>>; 4] = Default::default();
        let mut qt = [[0u16; 64]; 4];
        let mut qdef = [false; 4];
        let mut frame: Option<(u32, u32, Vec<Component>, bool)> = None;
        let (mut jfif, mut adobe, mut exif, mut restart) = (false, None, None, 0u32);
        loop {
            // Markers, with any fill bytes; anything else between segments: decline.
            if *data.get(i)? != 0xFF {
                return None;
            }
            while *data.get(i)? == 0xFF {
                i += 1;
            }
            let m = data[i];
            i += 1;
            let len = u16::from_be_bytes([*data.get(i)?, *data.get(i + 1)?]) as usize;
            if len < 2 {
                return None;
            }
            let seg = data.get(i + 2..i + len)?;
            i += len;
            match m {
                0xC0 | 0xC1 => {
                    if frame.is_some() || seg.len() < 6 || seg[0] != 8 {
                        return None;
                    }
                    let h = u16::from_be_bytes([seg[1], seg[2]]) as u32;
                    let w = u16::from_be_bytes([seg[3], seg[4]]) as u32;
                    let n = seg[5] as usize;
                    if w == 0 || h == 0 || !(n == 1 || n == 3) || seg.len() != 6 + 3 * n {
                        return None;
                    }
                    let mut comps = Vec::with_capacity(n);
                    for c in seg[6..].chunks_exact(3) {
                        let (hf, vf) = ((c[1] >> 4) as u32, (c[1] & 15) as u32);
                        if !(1..=4).contains(&hf)
                            || !(1..=4).contains(&vf)
                            || c[2] > 3
                            || comps.iter().any(|x: &Component| x.id == c[0])
                        {
                            return None;
                        }
                        comps.push(Component {
                            id: c[0],
                            h: hf,
                            v: vf,
                            tq: c[2] as usize,
                        });
                    }
                    // A grey image is one block per MCU whatever its factors; keep to
                    // the plain case. As jpeg-decoder: at most 10 blocks per MCU, and
                    // integer subsampling ratios only.
                    if n == 1 && (comps[0].h != 1 || comps[0].v != 1) {
                        return None;
                    }
                    let hmax = comps.iter().map(|c| c.h).max().unwrap_or(1);
                    let vmax = comps.iter().map(|c| c.v).max().unwrap_or(1);
                    if comps.iter().map(|c| c.h * c.v).sum::<u32>() > 10
                        || comps.iter().any(|c| hmax % c.h != 0 || vmax % c.v != 0)
                    {
                        return None;
                    }
                    frame = Some((w, h, comps, m == 0xC0));
                }
                // Progressive, lossless, hierarchical, arithmetic: not here.
                0xC2..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF | 0xCC => return None,
                0xC4 => {
                    let mut s = seg;
                    while !s.is_empty() {
                        let (class, id) = (s[0] >> 4, (s[0] & 15) as usize);
                        let counts: [u8; 16] = s.get(1..17)?.try_into().ok()?;
                        let total: usize = counts.iter().map(|&c| c as usize).sum();
                        let values = s.get(17..17 + total)?;
                        // As jpeg-decoder: no empty table, and ids 0–1 once a baseline
                        // frame is known.
                        let baseline = frame.as_ref().is_some_and(|f| f.3);
                        if id > 3 || class > 1 || total == 0 || total > 256 || baseline && id > 1 {
                            return None;
                        }
                        let t = Some(huffman(&counts, values)?);
                        if class == 0 {
                            dc[id] = t;
                        } else {
                            ac[id] = t;
                        }
                        s = &s[17 + total..];
                    }
                }
                0xDB => {
                    let mut s = seg;
                    while !s.is_empty() {
                        let (p, id) = (s[0] >> 4, (s[0] & 15) as usize);
                        if id > 3 || p > 0 {
                            return None;
                        }
                        let size = 64 << p;
                        let q = s.get(1..1 + size)?;
                        for k in 0..64 {
                            let v = if p == 0 {
                                q[k] as u16
                            } else {
                                u16::from_be_bytes([q[2 * k], q[2 * k + 1]])
                            };
                            if v == 0 {
                                return None;
                            }
                            qt[id][UNZIGZAG[k] as usize] = v;
                        }
                        qdef[id] = true;
                        s = &s[1 + size..];
                    }
                }
                0xDD => {
                    if seg.len() != 2 {
                        return None;
                    }
                    restart = u16::from_be_bytes([seg[0], seg[1]]) as u32;
                }
                0xE0 => jfif |= seg.starts_with(b"JFIF\0"),
                0xE1 => {
                    if let Some(e) = seg.strip_prefix(b"Exif\0\0") {
                        exif = Some(e);
                    }
                }
                0xEE => {
                    if seg.len() >= 12 && seg.starts_with(b"Adobe\0") {
                        if seg[11] > 2 {
                            return None;
                        }
                        adobe = Some(seg[11]);
                    }
                }
                0xE2..=0xED | 0xEF | 0xFE => {}
                0xDA => {
                    let (w, h, comps, baseline) = frame?;
                    let n = *seg.first()? as usize;
                    if n != comps.len() || seg.len() != 4 + 2 * n {
                        return None;
                    }
                    let mut tables = Vec::with_capacity(n);
                    for (k, c) in seg[1..1 + 2 * n].chunks_exact(2).enumerate() {
                        // Scan order must be frame order (it is, in practice).
                        let (td, ta) = ((c[1] >> 4) as usize, (c[1] & 15) as usize);
                        if c[0] != comps[k].id || td > 3 || ta > 3 {
                            return None;
                        }
                        if baseline && (td > 1 || ta > 1) {
                            return None;
                        }
                        dc[td].as_ref()?;
                        ac[ta].as_ref()?;
                        if !qdef[comps[k].tq] {
                            return None;
                        }
                        tables.push((td, ta));
                    }
                    let tail = &seg[1 + 2 * n..];
                    // Spectral selection 0..63, no successive approximation.
                    if tail != [0, 63, 0] {
                        return None;
                    }
                    let rgb = if n == 3 {
                        match (comps[0].id, comps[1].id, comps[2].id) {
                            (1, 2, 3) => false,
                            (82, 71, 66) => true,
                            (1, 34, 35) | (114, 103, 98) => return None,
                            _ if jfif => false,
                            _ => match adobe {
                                Some(0) => true,
                                Some(1) | None => false,
                                _ => return None,
                            },
                        }
                    } else {
                        false
                    };
                    return Some(Jpeg {
                        data,
                        width: w,
                        height: h,
                        comps,
                        tables,
                        dc,
                        ac,
                        qt,
                        restart,
                        rgb,
                        exif,
                        scan_start: i,
                    });
                }
                // SOI, EOI, RSTn, DNL, DAC, DHP, EXP and the rest: decline.
                _ => return None,
            }
        }
    }

    /// The image at 1/`scale` (2, 4 or 8) as `Decoder::scale(ceil(width / scale),
    /// ceil(height / scale))` gives it: RGB pixels (grey repeated) and their size. As
    /// there, the IDCT size is the smallest whose output reaches the requested width
    /// or height, so a tiny image may come out larger than asked.
    pub fn decode(&self, scale: u32) -> Option<(u32, u32, Vec<u8>)> {
        if ![2, 4, 8].contains(&scale) {
            return None;
        }
        let (w, h) = (self.width as usize, self.height as usize);
        let (rw, rh) = (w.div_ceil(scale as usize), h.div_ceil(scale as usize));
        let ds = [1usize, 2, 4]
            .into_iter()
            .find(|&d| (w * d).div_ceil(8) >= rw || (h * d).div_ceil(8) >= rh)
            .unwrap_or(8);
        if ds == 8 {
            return None;
        }
        let hmax = self.comps.iter().map(|c| c.h).max()? as usize;
        let vmax = self.comps.iter().map(|c| c.v).max()? as usize;
        let (mcux, mcuy) = (w.div_ceil(8 * hmax), h.div_ceil(8 * vmax));
        // Component planes at the reduced scale, whole blocks.
        let strides: Vec<usize> = self
            .comps
            .iter()
            .map(|c| mcux * c.h as usize * ds)
            .collect();
        // Every byte of a plane is written (each block's IDCT fills its ds×ds), so
        // the thread's planes from the last image serve as they are: no zeroing.
        let mut planes = Planes::take();
        planes.resize_with(self.comps.len(), Vec::new);
        for ((p, c), s) in planes.iter_mut().zip(&self.comps).zip(&strides) {
            p.resize(s * mcuy * c.v as usize * ds, 0);
        }
        // Filled as prefixes are met, and kept per thread for the next image with
        // the same table (most JPEGs carry the standard tables).
        let mut multi: [Vec<u16>; 4] = Default::default();
        for &(_, ta) in &self.tables {
            if multi[ta].is_empty() {
                multi[ta] = multi_table(&self.ac[ta].as_ref()?.key);
            }
        }
        let mut bits = Bits::new(self.data, self.scan_start);
        let mut pred = [0i16; 3];
        let (mut left, mut rst) = (self.restart, 0u8);
        let kmax = match ds {
            1 => 0,
            2 => 4,
            _ => 24,
        };
        for my in 0..mcuy {
            for mx in 0..mcux {
                // A scan short of data: stop now (jpeg-decoder would go on decoding
                // fed zeros to the end of a possibly huge image).
                if bits.overrun() {
                    return None;
                }
                if self.restart > 0 {
                    if left == 0 {
                        if bits.take_marker()? != 0xD0 + rst {
                            return None;
                        }
                        pred = [0; 3];
                        rst = (rst + 1) % 8;
                        left = self.restart;
                    }
                    left -= 1;
                }
                for (ci, c) in self.comps.iter().enumerate() {
                    let (td, ta) = self.tables[ci];
                    let (dct, act): (&Huffman, &Huffman) =
                        (self.dc[td].as_ref()?, self.ac[ta].as_ref()?);
                    let q = &self.qt[c.tq];
                    let multi = &mut multi[ta];
                    for v in 0..c.v as usize {
                        for hh in 0..c.h as usize {
                            let mut coef = [0i16; 16];
                            let ac = (act, &mut multi[..]);
                            block(&mut bits, dct, ac, &mut pred[ci], kmax, &mut coef)?;
                            let (bx, by) = (mx * c.h as usize + hh, my * c.v as usize + v);
                            let at = by * ds * strides[ci] + bx * ds;
                            idct(ds, &coef, q, strides[ci], &mut planes[ci][at..]);
                        }
                    }
                }
            }
        }
        for (ta, m) in multi.into_iter().enumerate() {
            if let Some(h) = self.ac[ta].as_ref().filter(|_| !m.is_empty()) {
                keep_multi_table(&h.key, m);
            }
        }
        // The scan must end within its data and be followed by the end of the image.
        if bits.overrun() || bits.take_marker()? != 0xD9 {
            return None;
        }
        let (ow, oh) = ((w * ds).div_ceil(8), (h * ds).div_ceil(8));
        let mut out = vec![0u8; ow * oh * 3];
        if self.comps.len() == 1 {
            for (y, row) in out.chunks_exact_mut(ow * 3).enumerate() {
                let src = &planes[0][y * strides[0]..][..ow];
                for (o, &l) in row.chunks_exact_mut(3).zip(src) {
                    o.copy_from_slice(&[l, l, l]);
                }
            }
            return Some((ow as u32, oh as u32, out));
        }
        let sizes: Vec<(usize, usize)> = self
            .comps
            .iter()
            .map(|c| {
                (
                    (w * c.h as usize * ds).div_ceil(hmax * 8),
                    (h * c.v as usize * ds).div_ceil(vmax * 8),
                )
            })
            .collect();
        let comps: Vec<Plane> = (0..3)
            .map(|ci| Plane {
                factors: (self.comps[ci].h as usize, self.comps[ci].v as usize),
                px: &planes[ci],
                size: sizes[ci],
                stride: strides[ci],
            })
            .collect();
        colour(&comps, (hmax, vmax), (ow, oh), self.rgb, &mut out)?;
        Some((ow as u32, oh as u32, out))
    }
}

thread_local! {
    /// Component planes of this thread's last decode, for the next.
    static PLANES: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A decode's component planes, handed back to [`PLANES`] when dropped.
struct Planes(Vec<Vec<u8>>);

impl Planes {
    fn take() -> Planes {
        Planes(PLANES.with(|p| std::mem::take(&mut *p.borrow_mut())))
    }
}

impl Drop for Planes {
    fn drop(&mut self) {
        // Planes past ~16 MiB (a huge image) are not kept.
        if self.0.iter().map(Vec::capacity).sum::<usize>() <= 16 << 20 {
            let planes = std::mem::take(&mut self.0);
            PLANES.with(|p| *p.borrow_mut() = planes);
        }
    }
}

impl std::ops::Deref for Planes {
    type Target = Vec<Vec<u8>>;
    fn deref(&self) -> &Vec<Vec<u8>> {
        &self.0
    }
}

impl std::ops::DerefMut for Planes {
    fn deref_mut(&mut self) -> &mut Vec<Vec<u8>> {
        &mut self.0
    }
}

thread_local! {
    /// Huffman tables this thread has built, newest last: most JPEGs carry the
    /// standard tables, and a file's headers are read twice (probe, then decode).
    static TABLES: std::cell::RefCell<Vec<Rc<Huffman>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// [`Huffman::new`] through [`TABLES`] (at most 16 kept), matched on the whole
/// definition, so a hit is exactly the table building would give.
fn huffman(counts: &[u8; 16], values: &[u8]) -> Option<Rc<Huffman>> {
    TABLES.with(|t| {
        let mut t = t.borrow_mut();
        let same = |h: &&Rc<Huffman>| h.key[..16] == counts[..] && h.key[16..] == *values;
        if let Some(h) = t.iter().rev().find(same) {
            return Some(h.clone());
        }
        let h = Rc::new(Huffman::new(counts, values)?);
        if t.len() >= 16 {
            t.remove(0);
        }
        t.push(h.clone());
        Some(h)
    })
}

thread_local! {
    /// Multi-symbol tables of the AC tables this thread has met, by definition.
    static MULTI_CACHE: std::cell::RefCell<Vec<(Vec<u8>, Vec<u16>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The multi-symbol table of the AC table with `key`: the cached one (taken out
/// while in use) or a fresh, empty one.
fn multi_table(key: &[u8]) -> Vec<u16> {
    MULTI_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        match c.iter().position(|(k, _)| k == key) {
            Some(i) => c.swap_remove(i).1,
            None => vec![UNSET; 1 << MULTI_BITS],
        }
    })
}

/// Puts a table back: at most 8 are kept, the newest.
fn keep_multi_table(key: &[u8], t: Vec<u16>) {
    MULTI_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= 8 {
            c.remove(0);
        }
        c.push((key.to_vec(), t));
    })
}

/// Natural 8×8 index → index in the top-left 4×4 (16: not kept).
const NAT4: [u8; 64] = {
    let mut t = [16u8; 64];
    let mut r = 0;
    while r < 4 {
        let mut c = 0;
        while c < 4 {
            t[r * 8 + c] = (r * 4 + c) as u8;
            c += 1;
        }
        r += 1;
    }
    t
};

/// One block: the DC and the AC values up to zigzag index `kmax` into `coef` (the
/// top-left 4×4, row-major); the rest is read past, a code and its value at once.
#[inline(always)]
fn block(
    bits: &mut Bits,
    dc: &Huffman,
    (ac, multi): (&Huffman, &mut [u16]),
    pred: &mut i16,
    kmax: usize,
    coef: &mut [i16; 16],
) -> Option<()> {
    bits.need();
    let s = bits.symbol(dc)? as u32;
    if s > 11 {
        return None;
    }
    *pred = pred.wrapping_add(bits.extend(s));
    coef[0] = *pred;
    let mut k = 1usize;
    // Symbols starting at or before kmax: their values may be kept.
    while k <= kmax {
        bits.need();
        let rs = bits.symbol(ac)?;
        let (r, s) = ((rs >> 4) as usize, (rs & 15) as u32);
        if s == 0 {
            match r {
                15 => {
                    k += 16;
                    continue;
                }
                0 => return Some(()),
                // An end-of-band run: progressive syntax in a baseline scan.
                _ => return None,
            }
        }
        k += r;
        if k >= 64 {
            return None;
        }
        if k <= kmax {
            let n = NAT4[UNZIGZAG[k] as usize] as usize;
            let v = bits.extend(s);
            if n < 16 {
                coef[n] = v;
            }
        } else {
            bits.consume(s);
        }
        k += 1;
    }
    while k < 64 {
        bits.need();
        // Several symbols at once while the block surely has room for them.
        let p = (bits.buf >> (64 - MULTI_BITS)) as usize;
        let mut m = multi[p];
        if m == UNSET {
            m = ac.multi(p);
            multi[p] = m;
        }
        if m != SINGLE && k + (((m >> 4) & 127) as usize) < 64 {
            bits.consume((m & 15) as u32);
            if m & EOB != 0 {
                return Some(());
            }
            k += ((m >> 4) & 127) as usize;
            continue;
        }
        let e = ac.skip[(bits.buf >> (64 - LUT_BITS)) as usize];
        if e != 0 {
            bits.consume((e & 31) as u32);
            if e & EOB != 0 {
                return Some(());
            }
            k += (e >> 5) as usize;
        } else {
            let rs = bits.symbol(ac)?;
            let (r, s) = ((rs >> 4) as usize, (rs & 15) as u32);
            match (r, s) {
                (0, 0) => return Some(()),
                (15, 0) => k += 16,
                (_, 0) => return None,
                _ => {
                    bits.consume(s);
                    k += r + 1;
                }
            }
        }
    }
    // Past the last coefficient: a run or ZRL the block has no room for.
    (k == 64).then_some(())
}

#[inline]
fn clamp(x: i32) -> u8 {
    x.clamp(0, 255) as u8
}

/// jpeg-decoder's reduced IDCTs (1×1, 2×2 and 4×4, after jidctred), from the
/// top-left 4×4 coefficients, writing a `ds`×`ds` block at `out` with `stride`.
fn idct(ds: usize, c: &[i16; 16], q: &[u16; 64], stride: usize, out: &mut [u8]) {
    let s = |r: usize, col: usize| (c[r * 4 + col] as i32).wrapping_mul(q[r * 8 + col] as i32);
    match ds {
        1 => out[0] = clamp(s(0, 0).wrapping_add(128 * 8) / 8),
        2 => {
            const SCALE_BITS: u32 = 3;
            let (s00, s10, s01, s11) = (s(0, 0), s(1, 0), s(0, 1), s(1, 1));
            let (x0, x2) = (s00.wrapping_add(s10), s00.wrapping_sub(s10));
            let (x1, x3) = (s01.wrapping_add(s11), s01.wrapping_sub(s11));
            let bias = (1 << (SCALE_BITS - 1)) + (128 << SCALE_BITS);
            let (x0, x2) = (x0.wrapping_add(bias), x2.wrapping_add(bias));
            out[0] = clamp(x0.wrapping_add(x1) >> SCALE_BITS);
            out[1] = clamp(x0.wrapping_sub(x1) >> SCALE_BITS);
            out[stride] = clamp(x2.wrapping_add(x3) >> SCALE_BITS);
            out[stride + 1] = clamp(x2.wrapping_sub(x3) >> SCALE_BITS);
        }
        _ => {
            const CONST_BITS: u32 = 12;
            const PASS1_BITS: u32 = 2;
            const FINAL_BITS: u32 = CONST_BITS + PASS1_BITS + 3;
            // jpeg-decoder's stbi_f2f(0.541196100, -1.847759065, 0.765366865): x·4096 + ½
            // in f32, truncated.
            let (k1, k2, k3) = (2217, -7567, 3135);
            let mut t = [0i32; 16];
            for i in 0..4 {
                let (s0, s1, s2, s3) = (s(0, i), s(1, i), s(2, i), s(3, i));
                let x0 = s0.wrapping_add(s2) << PASS1_BITS;
                let x2 = s0.wrapping_sub(s2) << PASS1_BITS;
                let p1 = s1.wrapping_add(s3).wrapping_mul(k1);
                let t0 = p1.wrapping_add(s3.wrapping_mul(k2)).wrapping_add(512)
                    >> (CONST_BITS - PASS1_BITS);
                let t2 = p1.wrapping_add(s1.wrapping_mul(k3)).wrapping_add(512)
                    >> (CONST_BITS - PASS1_BITS);
                t[i] = x0.wrapping_add(t2);
                t[i + 12] = x0.wrapping_sub(t2);
                t[i + 4] = x2.wrapping_add(t0);
                t[i + 8] = x2.wrapping_sub(t0);
            }
            for i in 0..4 {
                let (s0, s1, s2, s3) = (t[i * 4], t[i * 4 + 1], t[i * 4 + 2], t[i * 4 + 3]);
                let x0 = s0.wrapping_add(s2) << CONST_BITS;
                let x2 = s0.wrapping_sub(s2) << CONST_BITS;
                let p1 = s1.wrapping_add(s3).wrapping_mul(k1);
                let t0 = p1.wrapping_add(s3.wrapping_mul(k2));
                let t2 = p1.wrapping_add(s1.wrapping_mul(k3));
                let bias = (1 << (FINAL_BITS - 1)) + (128 << FINAL_BITS);
                let (x0, x2) = (x0.wrapping_add(bias), x2.wrapping_add(bias));
                let o = &mut out[i * stride..][..4];
                o[0] = clamp(x0.wrapping_add(t2) >> FINAL_BITS);
                o[3] = clamp(x0.wrapping_sub(t2) >> FINAL_BITS);
                o[1] = clamp(x2.wrapping_add(t0) >> FINAL_BITS);
                o[2] = clamp(x2.wrapping_sub(t0) >> FINAL_BITS);
            }
        }
    }
}

/// A decoded component at the reduced scale: its sampling factors, pixels, size in
/// pixels and row stride.
struct Plane<'a> {
    factors: (usize, usize),
    px: &'a [u8],
    size: (usize, usize),
    stride: usize,
}

super::avx2_dispatch! {
    /// Upsamples the three components of a colour image and converts them to RGB
    /// rows of `ow` pixels: jpeg-decoder's upsampling and colour conversion, in loops
    /// that vectorise (AVX2 where the CPU has it: the same integer arithmetic).
    fn colour(
        comps: &[Plane],
        max: (usize, usize),
        out_size: (usize, usize),
        rgb: bool,
        out: &mut [u8],
    ) -> Option<()> => colour_any
}

#[inline(always)]
fn colour_any(
    comps: &[Plane],
    (hmax, vmax): (usize, usize),
    (ow, oh): (usize, usize),
    rgb: bool,
    out: &mut [u8],
) -> Option<()> {
    let width_max = comps.iter().map(|c| c.size.0).max()?;
    let mut lines = vec![vec![0u8; width_max * hmax]; 3];
    let mut t = vec![0u16; width_max];
    let simd = simd_pixels(ow);
    for (y, row) in out.chunks_exact_mut(ow * 3).enumerate().take(oh) {
        for (c, line) in comps.iter().zip(lines.iter_mut()) {
            upsample(c, (hmax, vmax), (ow, oh), y, line, &mut t)?;
        }
        let [ly, lb, lr] = [&lines[0][..ow], &lines[1][..ow], &lines[2][..ow]];
        if rgb {
            for (o, ((&r, &g), &b)) in row.chunks_exact_mut(3).zip(ly.iter().zip(lb).zip(lr)) {
                o[0] = r;
                o[1] = g;
                o[2] = b;
            }
            continue;
        }
        let (a, b) = row.split_at_mut(simd * 3);
        for (o, ((&y, &cb), &cr)) in a.chunks_exact_mut(3).zip(ly.iter().zip(lb).zip(lr)) {
            let p = ycbcr_to_rgb_16(y, cb, cr);
            o[0] = p[0];
            o[1] = p[1];
            o[2] = p[2];
        }
        for (o, ((&y, &cb), &cr)) in b
            .chunks_exact_mut(3)
            .zip(ly[simd..].iter().zip(&lb[simd..]).zip(&lr[simd..]))
        {
            o.copy_from_slice(&ycbcr_to_rgb(y, cb, cr));
        }
    }
    Some(())
}

/// jpeg-decoder's fancy 2× horizontal upsampling of `v` (as row sums `t` with
/// `shift` 4 and `round` 8 after a vertical 3:1 blend, or plain pixels with 2 and
/// 2): each output is ¾ of its input and ¼ of the neighbour on its side; the two
/// ends copy (`end`). `out` holds `2 × v.len()` values.
#[inline(always)]
fn fancy_h2<T: Copy + Into<u16>>(v: &[T], out: &mut [u8], shift: u32, end: impl Fn(u16) -> u8) {
    let n = v.len();
    out[0] = end(v[0].into());
    out[2 * n - 1] = end(v[n - 1].into());
    let round = 1u16 << (shift - 1);
    for (o, (&a, &b)) in out[1..2 * n - 1]
        .chunks_exact_mut(2)
        .zip(v.iter().zip(&v[1..]))
    {
        let (a, b): (u16, u16) = (a.into(), b.into());
        o[0] = ((3 * a + b + round) >> shift) as u8;
        o[1] = ((3 * b + a + round) >> shift) as u8;
    }
}

/// One output row of a component, upsampled as jpeg-decoder's upsamplers do
/// (fancy triangle filters for 2×, nearest for other integer ratios). `t`: scratch
/// of the component's width.
#[inline(always)]
fn upsample(
    c: &Plane,
    (hmax, vmax): (usize, usize),
    (ow, oh): (usize, usize),
    row: usize,
    out: &mut [u8],
    t: &mut [u16],
) -> Option<()> {
    let ((h, v), plane, (iw, ih), stride) = (c.factors, c.px, c.size, c.stride);
    let h1 = h == hmax || ow == 1;
    let v1 = v == vmax || oh == 1;
    let h2 = h * 2 == hmax;
    let v2 = v * 2 == vmax;
    // The row below or above that the vertical triangle filter blends in (computed
    // in f32 as jpeg-decoder does).
    let near_far = || {
        let near = row as f32 / 2.0;
        let far = (near + near.fract() * 3.0 - 0.25).min((ih - 1) as f32);
        (near as usize, far as usize)
    };
    if h1 && v1 {
        out[..ow].copy_from_slice(&plane[row * stride..][..ow]);
    } else if h2 && v1 {
        let input = &plane[row * stride..][..iw];
        if iw == 1 {
            out[0] = input[0];
            out[1] = input[0];
            return Some(());
        }
        fancy_h2(input, out, 2, |x| x as u8);
    } else if h1 && v2 {
        let (near, far) = near_far();
        let n = &plane[near * stride..][..ow];
        let f = &plane[far * stride..][..ow];
        for ((o, &n), &f) in out[..ow].iter_mut().zip(n).zip(f) {
            *o = ((3 * n as u16 + f as u16 + 2) >> 2) as u8;
        }
    } else if h2 && v2 {
        let (near, far) = near_far();
        let n = &plane[near * stride..][..iw];
        let f = &plane[far * stride..][..iw];
        let t = &mut t[..iw];
        for ((t, &n), &f) in t.iter_mut().zip(n).zip(f) {
            *t = 3 * n as u16 + f as u16;
        }
        if iw == 1 {
            let value = ((t[0] + 2) >> 2) as u8;
            out[0] = value;
            out[1] = value;
            return Some(());
        }
        fancy_h2(t, out, 4, |x| ((x + 2) >> 2) as u8);
    } else {
        if hmax % h != 0 || vmax % v != 0 {
            return None;
        }
        let (hs, vs) = (hmax / h, vmax / v);
        let input = &plane[(row / vs) * stride..][..iw];
        for (i, &val) in input.iter().enumerate() {
            out[i * hs..(i + 1) * hs].fill(val);
        }
    }
    Some(())
}

/// How many pixels at the start of a row of `n` jpeg-decoder converts with its SSSE3
/// code (x86 with SSSE3, which has its own 16-bit rounding): all but the last 8–15.
fn simd_pixels(n: usize) -> usize {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        static SSSE3: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if *SSSE3.get_or_init(|| std::arch::is_x86_feature_detected!("ssse3")) {
            return (n / 8).saturating_sub(1) * 8;
        }
    }
    let _ = n;
    0
}

/// jpeg-decoder's SSSE3 conversion, one pixel: 16-bit values with 6 fraction bits
/// and rounding high multiplies (`pmulhrsw`); nothing saturates in range.
#[inline]
fn ycbcr_to_rgb_16(y: u8, cb: u8, cr: u8) -> [u8; 3] {
    const SHIFT: i32 = 6;
    let mulhrs = |a: i32, b: i32| (a * b + (1 << 14)) >> 15;
    let y = ((y as i32) << SHIFT) + (1 << (SHIFT - 1));
    let cb = (cb as i32 - 128) << SHIFT;
    let cr = (cr as i32 - 128) << SHIFT;
    let r = y + mulhrs(cr, 13173) + cr;
    let g = y - (mulhrs(cb, 11276) + mulhrs(cr, 23401));
    let b = y + mulhrs(cb, 25297) + cb;
    let c = |v: i32| (v >> SHIFT).clamp(0, 255) as u8;
    [c(r), c(g), c(b)]
}

/// jpeg-decoder's (libjpeg-turbo's) BT.601 conversion, 20-bit fixed point.
#[inline]
fn ycbcr_to_rgb(y: u8, cb: u8, cr: u8) -> [u8; 3] {
    const BITS: i32 = 20;
    const fn f(x: f32) -> i32 {
        (x * (1 << BITS) as f32 + 0.5) as i32
    }
    let y = y as i32 * (1 << BITS) + (1 << (BITS - 1));
    let (cb, cr) = (cb as i32 - 128, cr as i32 - 128);
    let c = |v: i32| (v >> BITS).clamp(0, 255) as u8;
    [
        c(y + f(1.40200) * cr),
        c(y - f(0.34414) * cb - f(0.71414) * cr),
        c(y + f(1.77200) * cb),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-thread table cache returns a table only for its whole definition:
    /// the same counts with other symbols are another table.
    #[test]
    fn huffman_tables_are_shared_only_for_the_same_definition() {
        let mut counts = [0u8; 16];
        counts[1] = 3; // three 2-bit codes: 00, 01, 10
        let a = huffman(&counts, &[1, 2, 3]).unwrap();
        let b = huffman(&counts, &[1, 2, 4]).unwrap();
        assert!(Rc::ptr_eq(&a, &huffman(&counts, &[1, 2, 3]).unwrap()));
        assert!(!Rc::ptr_eq(&a, &b));
        assert_eq!(a.lut[0b10 << (LUT_BITS - 2)], (2, 3));
        assert_eq!(b.lut[0b10 << (LUT_BITS - 2)], (2, 4));
        // Over-subscribed: refused, and not cached.
        counts[0] = 3;
        assert!(huffman(&counts, &[1, 2, 3, 4, 5, 6]).is_none());
    }
}
