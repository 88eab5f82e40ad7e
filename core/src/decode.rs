//! Erasure decoding of a run (a level of H, or C) from any half of its coded blocks.
//!
//! A run of 2m coded blocks is, column by column, the evaluations of a polynomial P
//! of degree < m on the 2m-th roots of unity (X at even powers, Y/c at odd powers:
//! see [`crate::code`]). Decoding is erasure decoding of Reed–Solomon with the
//! zero-polynomial method in O(m log m) per column after an O(m log² m) setup:
//! with E the missing evaluation points and Z(x) = Π_{e∈E}(x − e), the product P·Z
//! is known at every point (0 on E), so one inverse FFT gives its coefficients; P·Z
//! and Z are then evaluated on a coset g·H where Z has no root, divided pointwise,
//! and one inverse coset FFT gives P. With more than m blocks present, the extra
//! ones are checked: inconsistent inputs are an error, never garbage.

use crate::code::{bit_reverse, CodeError};
use crate::field::Fp;
use ark_ff::{FftField, Field, One, Zero};
use ark_poly::univariate::DensePolynomial;
use ark_poly::{DenseUVPolynomial, EvaluationDomain, Radix2EvaluationDomain};
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
    /// The blocks present do not lie on one codeword: some are corrupted.
    #[error("the coded blocks present are inconsistent (corrupted data)")]
    Inconsistent,
    /// The run's size is not a power of two ≥ 2 or too large for the field.
    #[error(transparent)]
    Shape(#[from] CodeError),
}

/// Recovers the m = `size`/2 blocks (in write order, `m × width` elements) of a run
/// of `size` coded blocks from the blocks present, given as `(position, block)`
/// pairs (positions 0..m−1 are X, m..2m−1 are Y), where `y_scale` is the run's
/// scalar c ([`crate::code::y_scale`]). Duplicated positions count once.
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
    if size < 2 || !size.is_power_of_two() {
        return Err(CodeError::NotPowerOfTwo(size as usize).into());
    }
    if width == 0 {
        return Err(CodeError::ZeroWidth.into());
    }
    let two_m = size as usize;
    let m = two_m / 2;
    let log_m = m.trailing_zeros();
    let domain = Radix2EvaluationDomain::<Fp>::new(two_m).ok_or(CodeError::TooLarge)?;
    let y_inv = y_scale.inverse().ok_or(CodeError::TooLarge)?;

    // Evaluation index j of the subgroup (ω^j) for each position, deduplicated.
    let mut slot: Vec<Option<&[Fp]>> = vec![None; two_m];
    for &(p, block) in present {
        if p >= size {
            return Err(DecodeError::Position { position: p, size });
        }
        if block.len() != width {
            return Err(DecodeError::Width { position: p, got: block.len(), expected: width });
        }
        let p = p as usize;
        let j = if p < m { 2 * p } else { 2 * (p - m) + 1 };
        slot[j] = Some(block);
    }
    let have = slot.iter().filter(|s| s.is_some()).count();
    if have < m {
        return Err(DecodeError::TooFewBlocks { have, need: m });
    }

    // Z over the missing points, its values on H and on the coset g·H.
    let missing: Vec<usize> = (0..two_m).filter(|&j| slot[j].is_none()).collect();
    let z = zero_polynomial(&missing, &domain);
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

    let mut out = vec![Fp::zero(); m * width];
    let mut col = vec![Fp::zero(); two_m];
    for c in 0..width {
        for j in 0..two_m {
            col[j] = match slot[j] {
                Some(b) => {
                    let v = if j % 2 == 1 { b[c] * y_inv } else { b[c] };
                    v * z_on_h[j]
                }
                None => Fp::zero(),
            };
        }
        domain.ifft_in_place(&mut col); // coefficients of P·Z
        coset.fft_in_place(&mut col); // P·Z on g·H
        for (v, zi) in col.iter_mut().zip(&z_coset_inv) {
            *v *= zi;
        }
        coset.ifft_in_place(&mut col); // coefficients of P
        if col[m..].iter().any(|v| !v.is_zero()) {
            return Err(DecodeError::Inconsistent);
        }
        for r in 0..m {
            out[r * width + c] = col[bit_reverse(r as u64, log_m) as usize];
        }
    }
    Ok(out)
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
