//! Decoding of a run (a level of H, or C) from any half of its coded blocks, with or
//! without wrong blocks among them.
//!
//! A run of 2m coded blocks is, column by column, the evaluations of a polynomial P
//! of degree < m on the 2m-th roots of unity (X at even powers, Y/c at odd powers:
//! see [`crate::code`]). [`decode_run`] is erasure decoding of Reed–Solomon with the
//! zero-polynomial method in O(m log m) per column after an O(m log² m) setup:
//! with E the missing evaluation points and Z(x) = Π_{e∈E}(x − e), the product P·Z
//! is known at every point (0 on E), so one inverse FFT gives its coefficients; P·Z
//! and Z are then evaluated on a coset g·H where Z has no root, divided pointwise,
//! and one inverse coset FFT gives P. With more than m blocks present, the extra
//! ones are checked: inconsistent inputs are an error, never garbage.
//!
//! [`decode_run_correcting`] also corrects wrong blocks (errors) up to the unique
//! decoding bound, erasures + 2·errors ≤ m: it locates them once for the whole run
//! (Forney syndromes of a random combination of the columns, Berlekamp–Massey), then
//! erasure-decodes every column without them and checks every column.

use crate::code::{bit_reverse, CodeError};
use crate::field::Fp;
use ark_ff::{FftField, Field, One, Zero};
use ark_poly::univariate::DensePolynomial;
use ark_poly::{DenseUVPolynomial, EvaluationDomain, Radix2EvaluationDomain};
use rayon::prelude::*;
use thiserror::Error;

/// Errors from decoding.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Fewer than half of the run's coded blocks were given.
    #[error("{have} distinct coded blocks present, {need} needed (half of the run)")]
    TooFewBlocks {
        /// Distinct blocks given.
        have: usize,
        /// m, half the run's size.
        need: usize,
    },
    /// A position is not inside the run.
    #[error("position {position} is outside a run of {size} blocks")]
    Position {
        /// The position.
        position: u64,
        /// The run's size.
        size: u64,
    },
    /// A block has the wrong number of elements.
    #[error("block at position {position} has {got} elements, expected {expected}")]
    Width {
        /// The position.
        position: u64,
        /// Elements given.
        got: usize,
        /// The width.
        expected: usize,
    },
    /// The blocks present do not lie on one codeword: some are corrupted
    /// ([`decode_run`], which corrects no errors).
    #[error("the coded blocks present are inconsistent (corrupted data)")]
    Inconsistent,
    /// Some blocks present are wrong, more than error-correction can fix
    /// ([`decode_run_correcting`]): with `erased` of the `size` positions absent, at
    /// most `max_errors` = ⌊(size/2 − erased)/2⌋ wrong blocks can be corrected, and no
    /// codeword is that close to the blocks present.
    #[error(
        "{erased} of {size} coded blocks absent and more than {max_errors} of the others wrong: \
         past the decoding bound (absent + 2·wrong ≤ {}); some blocks are corrupted beyond repair",
        size / 2
    )]
    TooManyErrors {
        /// The run's size (2m).
        size: u64,
        /// Positions absent.
        erased: usize,
        /// ⌊(m − erased)/2⌋, the most wrong blocks correctable with that many absent.
        max_errors: usize,
    },
    /// The run's size is not a power of two ≥ 2 or too large for the field.
    #[error(transparent)]
    Shape(#[from] CodeError),
}

/// Recovers the m = `size`/2 blocks (in write order, `m × width` elements) of a run
/// of `size` coded blocks from the blocks present, given as `(position, block)`
/// pairs (positions 0..m−1 are X, m..2m−1 are Y), where `y_scale` is the run's
/// scalar c ([`crate::code::y_scale`]). Duplicated positions count once.
///
/// This is the erasure-only decoder: every block present must be correct. Use
/// [`decode_run_correcting`] when some blocks present may be wrong.
///
/// Errors: fewer than m distinct positions ([`DecodeError::TooFewBlocks`]), a bad
/// position or width, or blocks beyond m that contradict the others
/// ([`DecodeError::Inconsistent`]).
pub fn decode_run(
    size: u64,
    width: usize,
    y_scale: Fp,
    present: &[(u64, &[Fp])],
) -> Result<Vec<Fp>, DecodeError> {
    let shape = Shape::new(size, width, y_scale)?;
    let slot = shape.slots(width, present)?;
    shape.decode_erasures(width, &slot)
}

/// The result of [`decode_run_correcting`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The m data blocks (records) in write order, `m × width` elements.
    pub data: Vec<Fp>,
    /// Positions (0..size, ascending) of blocks that were present but wrong: found by
    /// the decoder and treated as erasures. Empty when every block present was right.
    pub corrected: Vec<u64>,
}

/// Error-and-erasure decoding of a run: like [`decode_run`], but blocks present may
/// also be *wrong* (a provider committed or serves a wrong coded block). With e
/// positions absent and t wrong among those present, it recovers the data whenever
/// e + 2t ≤ m (m = `size`/2), the unique-decoding bound of the rate-1/2
/// Reed–Solomon code a run is; no secret is needed.
///
/// Algorithm (an error is a whole coded block, so errors are located once for all
/// columns):
/// 1. Combine the columns with pseudo-random coefficients (BLAKE3 of everything
///    present, so a provider cannot aim its errors at the combination): a wrong block
///    is wrong in the combined column too, except with probability width/p < 2^-54.
/// 2. Syndromes of that column: the top m coefficients of its inverse FFT (absent
///    points read as 0). Multiplying by the erasure polynomial Z_E leaves, in
///    coefficients e..m−1, m − e power sums of the errors alone (Forney's modified
///    syndromes).
/// 3. Berlekamp–Massey finds the shortest recurrence Λ of those; a valid error
///    locator has degree L with 2L ≤ m − e and exactly L roots, all at present points
///    (found with one FFT of Λ over the 2m points).
/// 4. Every column is then erasure-decoded with the located blocks removed
///    ([`decode_run`]'s method), which also checks that *every* remaining block of
///    every column lies on the decoded codeword.
///
/// So a result always agrees with all but L ≤ (m − e)/2 of the blocks present in every
/// column: it is the unique codeword that close, and equals the true data whenever
/// e + 2t ≤ m. Past the bound the answer is [`DecodeError::TooManyErrors`], except for
/// error patterns crafted to form another codeword within (m − e)/2 of what is
/// present, which no decoder can tell from the truth (such blocks fail the owner's
/// checksums: see `docs/SCHEME.md` §5).
///
/// Cost: with no wrong block, the erasure decoding plus one pass over the data (hash
/// and combination), one FFT pair and one polynomial product: a few percent more.
/// With t wrong blocks, Berlekamp–Massey adds O((m − e)·t) field operations for the
/// whole run (not per column): at most m²/2, about 2^31 for m = 2^16.
///
/// Errors: as [`decode_run`], with [`DecodeError::TooManyErrors`] in place of
/// [`DecodeError::Inconsistent`].
pub fn decode_run_correcting(
    size: u64,
    width: usize,
    y_scale: Fp,
    present: &[(u64, &[Fp])],
) -> Result<Decoded, DecodeError> {
    let shape = Shape::new(size, width, y_scale)?;
    let mut slot = shape.slots(width, present)?;
    let erased = slot.iter().filter(|s| s.is_none()).count();
    let too_many = DecodeError::TooManyErrors { size, erased, max_errors: (shape.m - erased) / 2 };
    let wrong = shape.locate_errors(size, width, y_scale, &slot).map_err(|_| too_many.clone())?;
    for &j in &wrong {
        slot[j] = None;
    }
    let data = shape.decode_erasures(width, &slot).map_err(|e| match e {
        DecodeError::Inconsistent => too_many,
        other => other,
    })?;
    let mut corrected: Vec<u64> = wrong.iter().map(|&j| shape.position(j)).collect();
    corrected.sort_unstable();
    Ok(Decoded { data, corrected })
}

/// The evaluation domain of a run and its constants.
struct Shape {
    two_m: usize,
    m: usize,
    log_m: u32,
    domain: Radix2EvaluationDomain<Fp>,
    y_inv: Fp,
}

/// The locator did not check out (turned into [`DecodeError::TooManyErrors`]).
struct Uncorrectable;

impl Shape {
    fn new(size: u64, width: usize, y_scale: Fp) -> Result<Self, DecodeError> {
        if size < 2 || !size.is_power_of_two() {
            return Err(CodeError::NotPowerOfTwo(size as usize).into());
        }
        if width == 0 {
            return Err(CodeError::ZeroWidth.into());
        }
        let two_m = usize::try_from(size).map_err(|_| CodeError::TooLarge)?;
        let m = two_m / 2;
        let domain = Radix2EvaluationDomain::<Fp>::new(two_m).ok_or(CodeError::TooLarge)?;
        let y_inv = y_scale.inverse().ok_or(CodeError::TooLarge)?;
        Ok(Self { two_m, m, log_m: m.trailing_zeros(), domain, y_inv })
    }

    /// The evaluation index j (the point ω^j) of position `p`: X at even j, Y at odd.
    fn index(&self, p: usize) -> usize {
        if p < self.m {
            2 * p
        } else {
            2 * (p - self.m) + 1
        }
    }

    /// The position of evaluation index `j`.
    fn position(&self, j: usize) -> u64 {
        if j.is_multiple_of(2) {
            (j / 2) as u64
        } else {
            (self.m + j / 2) as u64
        }
    }

    /// The blocks present by evaluation index, deduplicated; at least m of them.
    fn slots<'a>(&self, width: usize, present: &[(u64, &'a [Fp])]) -> Result<Vec<Option<&'a [Fp]>>, DecodeError> {
        let size = self.two_m as u64;
        let mut slot: Vec<Option<&[Fp]>> = vec![None; self.two_m];
        for &(p, block) in present {
            if p >= size {
                return Err(DecodeError::Position { position: p, size });
            }
            if block.len() != width {
                return Err(DecodeError::Width { position: p, got: block.len(), expected: width });
            }
            slot[self.index(p as usize)] = Some(block);
        }
        let have = slot.iter().filter(|s| s.is_some()).count();
        if have < self.m {
            return Err(DecodeError::TooFewBlocks { have, need: self.m });
        }
        Ok(slot)
    }

    /// Erasure decoding of every column (the module docs' method); blocks beyond m
    /// are checked: [`DecodeError::Inconsistent`] if any column is off the code.
    fn decode_erasures(&self, width: usize, slot: &[Option<&[Fp]>]) -> Result<Vec<Fp>, DecodeError> {
        let (two_m, m, domain) = (self.two_m, self.m, &self.domain);
        let have = slot.iter().filter(|s| s.is_some()).count();
        if have < m {
            return Err(DecodeError::TooFewBlocks { have, need: m });
        }
        // Z over the missing points, its values on H and on the coset g·H.
        let missing: Vec<usize> = (0..two_m).filter(|&j| slot[j].is_none()).collect();
        let z = zero_polynomial(&missing, domain);
        let mut z_on_h = z.coeffs.clone();
        z_on_h.resize(two_m, Fp::zero());
        domain.fft_in_place(&mut z_on_h);
        let coset = domain.get_coset(Fp::GENERATOR).ok_or(CodeError::TooLarge)?;
        let mut z_on_coset = z.coeffs.clone();
        z_on_coset.resize(two_m, Fp::zero());
        coset.fft_in_place(&mut z_on_coset);
        let z_coset_inv: Vec<Fp> = z_on_coset
            .iter()
            .map(|v| v.inverse().ok_or(CodeError::TooLarge))
            .collect::<Result<_, _>>()?;

        // Columns are independent: decode them on rayon's pool, a batch of columns at
        // a time (bounded extra memory), then scatter each into the row-major output.
        let decode_column = |col: &mut Vec<Fp>, c: usize| -> Result<Vec<Fp>, DecodeError> {
            for j in 0..two_m {
                col[j] = match slot[j] {
                    Some(b) => {
                        let v = if j % 2 == 1 { b[c] * self.y_inv } else { b[c] };
                        v * z_on_h[j]
                    }
                    None => Fp::zero(),
                };
            }
            domain.ifft_in_place(col); // coefficients of P·Z
            coset.fft_in_place(col); // P·Z on g·H
            for (v, zi) in col.iter_mut().zip(&z_coset_inv) {
                *v *= zi;
            }
            coset.ifft_in_place(col); // coefficients of P
            if col[m..].iter().any(|v| !v.is_zero()) {
                return Err(DecodeError::Inconsistent);
            }
            Ok((0..m).map(|r| col[bit_reverse(r as u64, self.log_m) as usize]).collect())
        };
        let mut out = vec![Fp::zero(); m * width];
        let batch = rayon::current_num_threads().max(1) * 4;
        for first in (0..width).step_by(batch) {
            let cols: Vec<Vec<Fp>> = (first..(first + batch).min(width))
                .into_par_iter()
                .map_init(|| vec![Fp::zero(); two_m], decode_column)
                .collect::<Result<_, _>>()?;
            out.par_chunks_mut(width).enumerate().for_each(|(r, row)| {
                for (k, values) in cols.iter().enumerate() {
                    row[first + k] = values[r];
                }
            });
        }
        Ok(out)
    }

    /// The evaluation indices of the wrong blocks among those present (steps 1–3 of
    /// [`decode_run_correcting`]), or [`Uncorrectable`] if no error locator within
    /// the bound explains the combined column.
    fn locate_errors(
        &self,
        size: u64,
        width: usize,
        y_scale: Fp,
        slot: &[Option<&[Fp]>],
    ) -> Result<Vec<usize>, Uncorrectable> {
        let (two_m, m) = (self.two_m, self.m);
        let missing: Vec<usize> = (0..two_m).filter(|&j| slot[j].is_none()).collect();
        let e = missing.len();
        if e >= m {
            return Ok(Vec::new()); // no redundancy: nothing can be located (or checked)
        }
        // 1. One column: a pseudo-random combination of all columns.
        let coeffs = combination(size, width, y_scale, slot);
        let mut r: Vec<Fp> = slot
            .par_iter()
            .enumerate()
            .map(|(j, s)| match s {
                Some(b) => {
                    let v: Fp = b.iter().zip(&coeffs).map(|(x, k)| *x * k).sum();
                    if j % 2 == 1 {
                        v * self.y_inv
                    } else {
                        v
                    }
                }
                None => Fp::zero(),
            })
            .collect();
        // 2. Syndromes: coefficients m..2m−1 (zero for a codeword), times Z_E.
        self.domain.ifft_in_place(&mut r);
        let syndromes = DensePolynomial::from_coefficients_slice(&r[m..]);
        let modified = if e == 0 { syndromes } else { poly_mul(&zero_polynomial(&missing, &self.domain), &syndromes) };
        let seq: Vec<Fp> = (e..m).map(|k| modified.coeffs.get(k).copied().unwrap_or_else(Fp::zero)).collect();
        if seq.iter().all(|v| v.is_zero()) {
            return Ok(Vec::new());
        }
        // 3. The error locator and its roots among the 2m points.
        let max_errors = (m - e) / 2;
        let locator = berlekamp_massey(&seq, max_errors).ok_or(Uncorrectable)?;
        let errors = locator.len() - 1;
        let mut values = locator;
        values.resize(two_m, Fp::zero());
        self.domain.fft_in_place(&mut values);
        let roots: Vec<usize> = (0..two_m).filter(|&j| values[j].is_zero()).collect();
        if roots.len() != errors || roots.iter().any(|&j| slot[j].is_none()) {
            return Err(Uncorrectable);
        }
        Ok(roots)
    }
}

/// Coefficients of the column combination: BLAKE3 (derive-key mode) over the run's
/// shape and every block present, expanded with its XOF to `width` elements. Binding
/// them to the data means wrong blocks cannot be chosen to cancel in the combination
/// (a provider would have to search ~2^54 block contents per success).
fn combination(size: u64, width: usize, y_scale: Fp, slot: &[Option<&[Fp]>]) -> Vec<Fp> {
    let mut h = blake3::Hasher::new_derive_key("dpor 2026 decode: column combination v1");
    h.update(&size.to_le_bytes());
    h.update(&(width as u64).to_le_bytes());
    h.update(&crate::field::to_bytes(y_scale));
    let mut buf = Vec::with_capacity(8 * width + 8);
    for (j, s) in slot.iter().enumerate() {
        if let Some(b) = s {
            buf.clear();
            buf.extend_from_slice(&(j as u64).to_le_bytes());
            for x in b.iter() {
                buf.extend_from_slice(&crate::field::to_bytes(*x));
            }
            h.update(&buf);
        }
    }
    let mut xof = h.finalize_xof();
    let mut word = [0u8; 8];
    (0..width)
        .map(|_| {
            xof.fill(&mut word);
            Fp::from(u64::from_le_bytes(word)) // reduced mod p; the bias (2^-32) is irrelevant here
        })
        .collect()
}

/// Berlekamp–Massey: the connection polynomial Λ (Λ_0 = 1, ascending coefficients,
/// length L + 1) of the shortest linear recurrence generating `seq`, or `None` if
/// that recurrence is longer than `max_len` (L never decreases, so it stops early).
/// O(len(seq)·L) field operations.
fn berlekamp_massey(seq: &[Fp], max_len: usize) -> Option<Vec<Fp>> {
    let mut c = vec![Fp::one()];
    let mut b = vec![Fp::one()];
    let mut l = 0usize;
    let mut shift = 1usize;
    let mut b_disc = Fp::one();
    for n in 0..seq.len() {
        let mut d = seq[n];
        for (ci, si) in c[1..].iter().zip(seq[..n].iter().rev()) {
            d += *ci * si;
        }
        if d.is_zero() {
            shift += 1;
            continue;
        }
        let coef = d * b_disc.inverse()?;
        let old = (2 * l <= n).then(|| c.clone());
        if c.len() < b.len() + shift {
            c.resize(b.len() + shift, Fp::zero());
        }
        for (ci, bi) in c[shift..].iter_mut().zip(&b) {
            *ci -= coef * bi;
        }
        match old {
            Some(t) => {
                l = n + 1 - l;
                if l > max_len {
                    return None;
                }
                b = t;
                b_disc = d;
                shift = 1;
            }
            None => shift += 1,
        }
    }
    c.resize(l + 1, Fp::zero());
    Some(c)
}

/// Z(x) = Π_{j ∈ missing}(x − ω^j) by a product tree (FFT multiplications).
fn zero_polynomial(missing: &[usize], domain: &Radix2EvaluationDomain<Fp>) -> DensePolynomial<Fp> {
    let omega = domain.group_gen;
    let mut layer: Vec<DensePolynomial<Fp>> = missing
        .iter()
        .map(|&j| DensePolynomial::from_coefficients_vec(vec![-omega.pow([j as u64]), Fp::one()]))
        .collect();
    if layer.is_empty() {
        return DensePolynomial::from_coefficients_vec(vec![Fp::one()]);
    }
    while layer.len() > 1 {
        layer = layer
            .chunks(2)
            .map(|pair| match pair {
                [a, b] => poly_mul(a, b),
                [a] => a.clone(),
                _ => DensePolynomial::from_coefficients_vec(vec![Fp::one()]),
            })
            .collect();
    }
    layer.pop().unwrap_or_else(|| DensePolynomial::from_coefficients_vec(vec![Fp::one()]))
}

/// Product of two polynomials: schoolbook for small factors, ark-poly's FFT product otherwise.
fn poly_mul(a: &DensePolynomial<Fp>, b: &DensePolynomial<Fp>) -> DensePolynomial<Fp> {
    if a.coeffs.len().min(b.coeffs.len()) <= 32 {
        a.naive_mul(b)
    } else {
        a * b
    }
}
