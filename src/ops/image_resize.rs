//! `image_resize`: resize and re-encode images at ingest as img2dataset does
//! (`image_size`, `resize_mode`, `resize_only_if_bigger`, `encode_format`,
//! `encode_quality`), on Pillow's resampling bit for bit ([`crate::kernels::resample`])
//! and img2dataset's geometry ([`crate::kernels::image_resize`]). Alpha is matted
//! onto white, EXIF orientation applied, every mode becomes RGB. The image column is
//! replaced; the original bytes are dropped unless `original_column` names a column
//! to keep them in. An image that is left as it is (no resize, already in the
//! output format, opaque RGB or grey, upright) keeps its bytes. `width`, `height`
//! (of the new image), `original_width` and `original_height` are added, and a
//! `content_type` column the input has is set to the new format's. An image that does
//! not decode is a reject with the decoder's reason.
use super::image_common as ic;
use super::params::{Params, params};
use super::{Drop, OpDef, Operator, Output, ProcessError, SchemaError};
use crate::kernels::image::{Limits, decode_matted};
use crate::kernels::image_resize::{Encoding, Mode, apply, encode, plan};
use crate::kernels::resample::Filter;
use crate::spec::reader::Obj;
use arrow_array::{ArrayRef, BinaryArray, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const DEF: OpDef = OpDef {
    name: "image_resize",
    summary: "resizes and re-encodes images as img2dataset does (Pillow's resampling)",
    params: ImageResizeParams::describe,
    example: r#"{"image_size": 256, "resize_mode": "center_crop", "encode_format": "jpg"}"#,
    feature: None,
    build: Some(build),
};

params! {
    /// `image_resize`.
    pub struct ImageResizeParams {
        /// The side the mode sizes to, in pixels.
        image_size: u64 [1, 65500] = 256,
        /// `no` (unchanged), `keep_ratio` (shorter side = image_size),
        /// `keep_ratio_largest` (longer side = image_size), `center_crop` (shorter side
        /// = image_size, then the centred square) or `border` (longer side =
        /// image_size, padded to the square with white).
        resize_mode: String = "keep_ratio",
        /// Only shrink: an image whose judged side is not larger than image_size is
        /// left as it is.
        resize_only_if_bigger: bool = false,
        /// Pillow's resampling filter: `lanczos`, `bicubic` or `bilinear`.
        filter: String = "lanczos",
        /// `jpg` (4:2:0, as Pillow saves), `png` or `webp` (lossless).
        encode_format: String = "jpg",
        /// JPEG quality, 1–100.
        encode_quality: u64 [1, 100] = 95,
        /// A column to keep the original bytes in (none: they are dropped).
        original_column: Option<String>,
    }
    flatten { image: ic::ImageParams }
}

struct ImageResize {
    column: String,
    limits: Limits,
    size: u32,
    mode: Mode,
    only_if_bigger: bool,
    filter: Filter,
    encoding: Encoding,
    original: Option<String>,
}

fn build(_stage: &str, o: &Obj) -> Option<Box<dyn Operator>> {
    let p = ImageResizeParams::read(o)?;
    let mode = Mode::parse(&p.resize_mode).or_else(|| {
        o.error(
            "resize_mode",
            format!(
                "unknown mode {:?}, expected one of: {}",
                p.resize_mode,
                Mode::NAMES.join(", ")
            ),
        );
        None
    });
    let filter = match p.filter.as_str() {
        "lanczos" => Some(Filter::Lanczos),
        "bicubic" => Some(Filter::Bicubic),
        "bilinear" => Some(Filter::Bilinear),
        f => {
            o.error(
                "filter",
                format!("unknown filter {f:?}, expected lanczos, bicubic or bilinear"),
            );
            None
        }
    };
    let encoding = match p.encode_format.as_str() {
        "jpg" | "jpeg" => Some(Encoding::Jpeg {
            quality: p.encode_quality as u8,
        }),
        "png" => Some(Encoding::Png),
        "webp" => Some(Encoding::Webp),
        f => {
            o.error(
                "encode_format",
                format!("unknown format {f:?}, expected jpg, png or webp"),
            );
            None
        }
    };
    if p.original_column.as_deref() == Some(p.image.column.as_str()) {
        o.error(
            "original_column",
            "must differ from the image column, which holds the resized image",
        );
        return None;
    }
    Some(Box::new(ImageResize {
        limits: p.image.limits(),
        column: p.image.column,
        size: p.image_size as u32,
        mode: mode?,
        only_if_bigger: p.resize_only_if_bigger,
        filter: filter?,
        encoding: encoding?,
        original: p.original_column,
    }))
}

/// One image's result: the new bytes and sizes.
struct Resized {
    bytes: Option<Vec<u8>>,
    size: (u32, u32),
    original: (u32, u32),
}

impl ImageResize {
    fn one(&self, b: &[u8]) -> Result<Resized, Drop> {
        let d = decode_matted(b, &self.limits, None, Some([255, 255, 255]))
            .map_err(|e| ic::drop_of(&e))?;
        let (w, h) = d.rgb.dimensions();
        let p = plan(w, h, self.mode, self.size, self.only_if_bigger);
        // A sliver upscaled by keep_ratio (1×10,000 to a 256 short side is 256×2.56M)
        // is held to the decode limit, as a bomb would be.
        let (cw, ch) = p.canvas;
        let (sw, sh) = p.scaled;
        let most = (cw as u64 * ch as u64).max(sw as u64 * sh as u64);
        let side = match self.encoding {
            Encoding::Jpeg { .. } => 65_535,
            Encoding::Webp => 16_383,
            Encoding::Png => u32::MAX,
        };
        if cw.max(ch) > side {
            return Err(Drop {
                reason: "resize_too_large",
                detail: Some(format!(
                    "{w}x{h} resized to {cw}x{ch}: a {} side is at most {side}",
                    self.encoding.format()
                )),
            });
        }
        if most > self.limits.max_pixels {
            return Err(Drop {
                reason: "resize_too_large",
                detail: Some(format!(
                    "{w}x{h} resized to {sw}x{sh} is more than max_pixels {}",
                    self.limits.max_pixels
                )),
            });
        }
        let unchanged = p.is_identity(w, h)
            && d.header.format == self.encoding.format()
            && matches!(d.header.mode, "RGB" | "L")
            && (d.header.width, d.header.height) == (w, h);
        if unchanged {
            return Ok(Resized {
                bytes: None,
                size: (w, h),
                original: (w, h),
            });
        }
        let out = apply(&d.rgb, &p, self.filter);
        let bytes = encode(&out, self.encoding).map_err(|e| Drop {
            reason: "encode_error",
            detail: Some(e),
        })?;
        Ok(Resized {
            bytes: Some(bytes),
            size: out.dimensions(),
            original: (w, h),
        })
    }
}

impl Operator for ImageResize {
    fn histograms(&self) -> Vec<String> {
        ["width", "height"].map(String::from).to_vec()
    }
    /// The image column, and the sizes and content type an earlier stage wrote.
    fn replaces(&self) -> bool {
        true
    }
    fn output_fields(&self, input: &Schema) -> Result<Vec<Field>, SchemaError> {
        ic::require_binary(input, &self.column)?;
        let image_type = input
            .field_with_name(&self.column)
            .map(|f| f.data_type().clone());
        let mut f = vec![
            Field::new(&self.column, image_type.unwrap_or(DataType::Binary), true),
            Field::new("width", DataType::UInt32, true),
            Field::new("height", DataType::UInt32, true),
            Field::new("original_width", DataType::UInt32, true),
            Field::new("original_height", DataType::UInt32, true),
        ];
        if input
            .field_with_name("content_type")
            .is_ok_and(|c| c.data_type() == &DataType::Utf8)
        {
            f.push(Field::new("content_type", DataType::Utf8, true));
        }
        if let Some(o) = &self.original {
            f.push(Field::new(o, DataType::Binary, true));
        }
        Ok(f)
    }
    fn process(&self, batch: &RecordBatch) -> Result<Output, ProcessError> {
        use rayon::prelude::*;
        let v = ic::values(batch, &self.column)?;
        let done: Vec<Result<Resized, Drop>> = v
            .par_iter()
            .map(|b| match b {
                None => Err(ic::missing()),
                Some(b) => self.one(b),
            })
            .collect();
        let image: BinaryArray = done
            .iter()
            .zip(&v)
            .map(|(r, orig)| match r {
                Ok(Resized { bytes: Some(b), .. }) => Some(b.as_slice()),
                Ok(Resized { bytes: None, .. }) => *orig,
                Err(_) => None,
            })
            .collect();
        let dim = |f: &dyn Fn(&Resized) -> u32| -> ArrayRef {
            Arc::new(
                done.iter()
                    .map(|r| r.as_ref().ok().map(f))
                    .collect::<UInt32Array>(),
            )
        };
        let image: ArrayRef = Arc::new(image);
        let image = match batch.column_by_name(&self.column).map(|c| c.data_type()) {
            Some(t) if t != image.data_type() => arrow_cast::cast(&image, t)?,
            _ => image,
        };
        let mut cols: Vec<ArrayRef> = vec![
            image,
            dim(&|r| r.size.0),
            dim(&|r| r.size.1),
            dim(&|r| r.original.0),
            dim(&|r| r.original.1),
        ];
        if batch
            .schema()
            .field_with_name("content_type")
            .is_ok_and(|c| c.data_type() == &DataType::Utf8)
        {
            let old = batch
                .column_by_name("content_type")
                .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned());
            let ct: StringArray = done
                .iter()
                .enumerate()
                .map(|(i, r)| match r {
                    Ok(Resized { bytes: Some(_), .. }) => {
                        Some(self.encoding.content_type().to_string())
                    }
                    Ok(Resized { bytes: None, .. }) => old
                        .as_ref()
                        .and_then(|o| arrow_array::Array::is_valid(o, i).then(|| o.value(i)))
                        .map(str::to_string),
                    Err(_) => None,
                })
                .collect();
            cols.push(Arc::new(ct));
        }
        if self.original.is_some() {
            cols.push(Arc::new(v.iter().copied().collect::<BinaryArray>()));
        }
        let verdicts = done.into_iter().map(|r| r.err()).collect();
        Ok(Output::annotated(cols, verdicts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{build, image_batch, png};
    use crate::ops::{output_schema, run_stage};
    use arrow_array::Array;

    fn col_u32(b: &RecordBatch, n: &str) -> Vec<u32> {
        let a = b.column_by_name(n).unwrap();
        let a = a.as_any().downcast_ref::<UInt32Array>().unwrap();
        (0..a.len()).map(|i| a.value(i)).collect()
    }

    #[test]
    fn resizes_reencodes_and_rejects_what_does_not_decode() {
        let op = build(
            &DEF,
            serde_json::json!({"image_size": 16, "resize_mode": "center_crop", "encode_format": "png", "original_column": "original"}),
        )
        .unwrap();
        let img = png(40, 20, true);
        let batch = image_batch(&[Some(&img), Some(b"not an image"), None]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (kept, rejects) = run_stage("resize", op.as_ref(), batch, &schema, true).unwrap();
        assert_eq!(kept.num_rows(), 1);
        assert_eq!(rejects.len(), 2);
        assert_eq!(col_u32(&kept, "width"), [16]);
        assert_eq!(col_u32(&kept, "height"), [16]);
        assert_eq!(col_u32(&kept, "original_width"), [40]);
        let bytes = kept
            .column_by_name("image")
            .unwrap()
            .as_any()
            .downcast_ref::<BinaryArray>()
            .unwrap()
            .value(0)
            .to_vec();
        let back = image::load_from_memory(&bytes).unwrap();
        assert_eq!((back.width(), back.height()), (16, 16));
        let orig = kept.column_by_name("original").unwrap();
        let orig = orig.as_any().downcast_ref::<BinaryArray>().unwrap();
        assert_eq!(orig.value(0), img.as_slice());
    }

    #[test]
    fn an_image_left_as_it_is_keeps_its_bytes() {
        let op = build(
            &DEF,
            serde_json::json!({"image_size": 64, "resize_only_if_bigger": true, "encode_format": "png"}),
        )
        .unwrap();
        let img = png(30, 20, false);
        let batch = image_batch(&[Some(&img)]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (kept, _) = run_stage("resize", op.as_ref(), batch, &schema, true).unwrap();
        let a = kept.column_by_name("image").unwrap();
        let a = a.as_any().downcast_ref::<BinaryArray>().unwrap();
        assert_eq!(a.value(0), img.as_slice());
    }

    #[test]
    fn an_upscaled_sliver_is_held_to_max_pixels() {
        let op = build(
            &DEF,
            serde_json::json!({"image_size": 256, "max_pixels": 1000000, "encode_format": "png"}),
        )
        .unwrap();
        let img = png(1, 400, false);
        let batch = image_batch(&[Some(&img)]);
        let schema = output_schema(op.as_ref(), &batch.schema()).unwrap();
        let (kept, rejects) = run_stage("resize", op.as_ref(), batch, &schema, true).unwrap();
        assert_eq!(kept.num_rows(), 0);
        assert_eq!(rejects[0].reason, "resize_too_large");
    }

    #[test]
    fn bad_params_are_named() {
        for (p, field) in [
            (serde_json::json!({"resize_mode": "stretch"}), "resize_mode"),
            (serde_json::json!({"filter": "nearest"}), "filter"),
            (serde_json::json!({"encode_format": "gif"}), "encode_format"),
            (serde_json::json!({"encode_quality": 0}), "encode_quality"),
            (
                serde_json::json!({"original_column": "image"}),
                "original_column",
            ),
        ] {
            let e = build(&DEF, p.clone())
                .err()
                .unwrap_or_else(|| panic!("{p}"));
            assert!(e.join(" ").contains(field), "{p}: {e:?}");
        }
    }
}
