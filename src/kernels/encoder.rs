//! The heads of a text encoder's outputs: pooling `[rows, tokens, width]` hidden
//! states into one vector per text (the first token, or the mean over the attention
//! mask as sentence-transformers computes it), activations of logits, and the
//! FineWeb-Edu integer grade. Pure arithmetic on slices.

/// How hidden states become one vector per text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The first token's state (`[CLS]`, `<s>`).
    Cls,
    /// The mean of the states whose attention mask is 1.
    Mean,
}

/// Pools `hidden` (`rows` × `len` × `width`, row-major) with `mask` (`rows` × `len`)
/// into `rows` × `width`.
pub fn pool(
    hidden: &[f32],
    mask: &[i64],
    rows: usize,
    len: usize,
    width: usize,
    how: Pooling,
) -> Vec<f32> {
    let mut out = vec![0f32; rows * width];
    for r in 0..rows {
        let o = &mut out[r * width..(r + 1) * width];
        let base = r * len * width;
        match how {
            Pooling::Cls => o.copy_from_slice(&hidden[base..base + width]),
            Pooling::Mean => {
                let mut n = 0f32;
                for t in 0..len {
                    if mask[r * len + t] == 0 {
                        continue;
                    }
                    n += 1.0;
                    let h = &hidden[base + t * width..base + (t + 1) * width];
                    o.iter_mut().zip(h).for_each(|(a, b)| *a += b);
                }
                // As sentence-transformers: the sum over the count clamped at 1e-9.
                let n = n.max(1e-9);
                o.iter_mut().for_each(|a| *a /= n);
            }
        }
    }
    out
}

/// What scores are made of logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Raw,
    /// Over each row's logits.
    Softmax,
    /// Each logit.
    Sigmoid,
}

/// Applies `how` to `rows` of `k` logits in place.
pub fn activate(logits: &mut [f32], k: usize, how: Activation) {
    match how {
        Activation::Raw => {}
        Activation::Sigmoid => logits
            .iter_mut()
            .for_each(|x| *x = 1.0 / (1.0 + (-*x).exp())),
        Activation::Softmax => {
            for row in logits.chunks_mut(k.max(1)) {
                let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0f32;
                for x in row.iter_mut() {
                    *x = (*x - m).exp();
                    sum += *x;
                }
                row.iter_mut().for_each(|x| *x /= sum);
            }
        }
    }
}

/// FineWeb-Edu's integer grade of a regression score: `int(round(max(0, min(score,
/// 5))))` in Python, whose `round` takes halves to the even integer.
pub fn int_score(score: f32) -> i32 {
    (score as f64).clamp(0.0, 5.0).round_ties_even() as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_cls_and_masked_mean() {
        // 2 rows × 3 tokens × 2 wide; row 1 has one padded token.
        let h = [1., 2., 3., 4., 5., 6., 10., 20., 30., 40., 99., 99.];
        let mask = [1, 1, 1, 1, 1, 0];
        assert_eq!(pool(&h, &mask, 2, 3, 2, Pooling::Cls), [1., 2., 10., 20.]);
        assert_eq!(pool(&h, &mask, 2, 3, 2, Pooling::Mean), [3., 4., 20., 30.]);
    }

    #[test]
    fn activations_and_the_fineweb_edu_grade() {
        let mut l = [0.0, (3f32).ln()];
        activate(&mut l, 2, Activation::Softmax);
        assert!((l[0] - 0.25).abs() < 1e-6 && (l[1] - 0.75).abs() < 1e-6);
        let mut l = [0.0];
        activate(&mut l, 1, Activation::Sigmoid);
        assert_eq!(l, [0.5]);
        let got: Vec<i32> = [-1.0, 0.49, 0.5, 1.5, 2.5, 2.51, 4.6, 7.0]
            .iter()
            .map(|&s| int_score(s))
            .collect();
        assert_eq!(got, [0, 0, 0, 2, 2, 3, 5, 5]);
    }
}
