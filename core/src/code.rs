//! The incrementally constructible code of §4.4–4.5 (Fig. 3–4).
//!
//! Blocks are vectors of field elements, encoded column by column (§4.6); here a
//! sequence of blocks is a flat row-major slice `&[Fp]` of `blocks × width`
//! elements, so the same functions run on records (width s) and on checksums
//! (width ρ, which is how the owner checks a server-side rebuild, §5.3).
//!
//! A *run* of level ℓ (or C, the top level) holds `2^(ℓ+1)` coded blocks laid out
//! `[X | Y]`. With m = 2^ℓ blocks D_0..D_{m−1} in write order, written at times
//! t0..t0+m−1 since the last C-rebuild, and P(x) = Σ_r D_r·x^{ψ_ℓ(r)} (coefficients in
//! bit-reversed write order), X[i] = P(ω^{2i}) and Y[i] = c·P(ω^{2i+1}) with ω a
//! primitive 2m-th root of unity and c = w^{ψ_k(t0)} ([`y_scale`]): a rate-1/2
//! Reed–Solomon codeword, so any m of the 2m coded blocks recover the data
//! ([`crate::decode`]). Tests check this against ark-poly's FFT and against the
//! generator matrix.

use crate::field::{from_montgomery, root_of_unity, to_montgomery, to_u64, Fp};
use ark_ff::Field;
use rayon::prelude::*;
use thiserror::Error;

/// Errors from the code's functions: shapes that do not match.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodeError {
    /// A slice's length is not `blocks × width` for the required block count.
    #[error("expected {expected_blocks} blocks of width {width} ({} elements), got {got} elements", expected_blocks * width)]
    Shape {
        /// Blocks required.
        expected_blocks: usize,
        /// Elements per block.
        width: usize,
        /// Elements received.
        got: usize,
    },
    /// A size that must be a power of two (≥ 2 for `mix`) is not.
    #[error("{0} blocks is not a power of two of at least 2")]
    NotPowerOfTwo(usize),
    /// The level's size exceeds the field's two-adicity.
    #[error("level too large for the field")]
    TooLarge,
    /// HAdd was given consumed levels that do not match the write counter.
    #[error("write counter {t} needs levels 0..{needed} consumed, got {got}")]
    Levels {
        /// The write counter.
        t: u64,
        /// Levels to consume (= trailing ones of t).
        needed: u32,
        /// Levels given.
        got: usize,
    },
    /// The width is zero.
    #[error("block width is zero")]
    ZeroWidth,
}

/// ψ: the bit reversal of the low `bits` bits of `x`.
pub fn bit_reverse(x: u64, bits: u32) -> u64 {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (64 - bits)
    }
}

/// w^{ψ_k(t)}: the factor HAdd multiplies a block written at time `t` (writes since
/// the last C-rebuild, 0 ≤ t < N) by before it enters the Y half (Fig. 4), where w is
/// a primitive 2N-th root of unity and N = 2^`log_blocks`.
pub fn twist(t: u64, log_blocks: u32) -> Result<Fp, CodeError> {
    let w = root_of_unity(log_blocks + 1).ok_or(CodeError::TooLarge)?;
    Ok(w.pow([bit_reverse(t, log_blocks)]))
}

/// The scalar c on the Y half of a run whose first block was written at time `t0`
/// (c = w^{ψ_k(t0)}; 1 for C, whose blocks count as written at times 0..N−1).
pub fn y_scale(t0: u64, log_blocks: u32) -> Result<Fp, CodeError> {
    twist(t0, log_blocks)
}

/// The level HAdd fills when the write counter is `t`: the first empty level,
/// i.e. the number of trailing one bits of t (H is a binary counter).
pub fn target_level(t: u64) -> u32 {
    t.trailing_ones()
}

/// The time t0 of the first write held by level `level` when the counter is `t`
/// (bit `level` of t must be set): t with its low `level + 1` bits cleared.
pub fn level_start(t: u64, level: u32) -> u64 {
    let mask = (1u64 << (level + 1)).wrapping_sub(1);
    t & !mask
}

fn check_blocks(buf: &[Fp], blocks: usize, width: usize) -> Result<(), CodeError> {
    if width == 0 {
        return Err(CodeError::ZeroWidth);
    }
    if buf.len() != blocks * width {
        return Err(CodeError::Shape { expected_blocks: blocks, width, got: buf.len() });
    }
    Ok(())
}

/// `mix(A0, A1)` of Fig. 4, in place: `buf = [A0 | A1]` (A0 the older array, A1 the
/// newer, m = 2^ℓ blocks each) becomes A with A[i] = A0[i] + ν^i·A1[i] and
/// A[i+m] = A0[i] − ν^i·A1[i], ν a primitive 2m-th root of unity. This is one
/// radix-2 decimation-in-time butterfly stage on whole blocks.
///
/// Errors if `buf` is not 2m blocks of `width` elements with m a power of two.
pub fn mix(buf: &mut [Fp], width: usize) -> Result<(), CodeError> {
    if width == 0 {
        return Err(CodeError::ZeroWidth);
    }
    let blocks = buf.len() / width;
    if !buf.len().is_multiple_of(width) || blocks < 2 || !blocks.is_power_of_two() {
        return Err(CodeError::NotPowerOfTwo(blocks));
    }
    let nu = root_of_unity(blocks.trailing_zeros()).ok_or(CodeError::TooLarge)?;
    let mut words = to_words(buf);
    mix_unchecked(&mut words, width, nu);
    for (e, w) in buf.iter_mut().zip(words) {
        *e = from_montgomery(w);
    }
    Ok(())
}

/// The Montgomery words of `elements` ([`to_montgomery`]): the code's transforms run
/// on words, in `dpor_butterfly`'s SIMD lanes.
fn to_words(elements: &[Fp]) -> Vec<u64> {
    elements.iter().map(|e| to_montgomery(*e)).collect()
}

/// The elements of Montgomery words (the buffer's allocation is reused: same size
/// and alignment).
pub(crate) fn from_words(words: Vec<u64>) -> Vec<Fp> {
    words.into_iter().map(from_montgomery).collect()
}

/// Elements below which a transform stays on the calling thread: smaller jobs cost
/// less than handing them to another core (64 Ki elements = 512 KiB, about 110
/// blocks of β = 4096).
const PAR_MIN_ELEMENTS: usize = 1 << 16;

/// Block pairs per parallel task in a butterfly stage ([`mix_unchecked`]).
const PAR_PAIRS: usize = 64;

/// The butterfly loop of [`mix`] with ν given, on Montgomery words; `buf.len()` is
/// `2m·width`.
///
/// Block pairs are independent: a large stage is split into tasks of [`PAR_PAIRS`]
/// pairs on rayon's pool, each starting from its own twiddle ν^start. Field
/// arithmetic is exact, so the result does not depend on the split (tests compare
/// against a one-thread pool).
pub(crate) fn mix_unchecked(buf: &mut [u64], width: usize, nu: Fp) {
    let half = buf.len() / 2;
    let (a0, a1) = buf.split_at_mut(half);
    if half < PAR_MIN_ELEMENTS || rayon::current_num_threads() < 2 {
        mix_pairs(a0, a1, width, Fp::from(1u64), nu);
        return;
    }
    let task = PAR_PAIRS * width;
    a0.par_chunks_mut(task).zip(a1.par_chunks_mut(task)).enumerate().for_each(|(k, (x, y))| {
        let start = nu.pow([(k * PAR_PAIRS) as u64]);
        mix_pairs(x, y, width, start, nu);
    });
}

/// Butterflies of the block pairs (x[i], y[i]) (Montgomery words) with twiddles `tw`,
/// `tw·ν`, `tw·ν²`, …: `dpor_butterfly`'s kernels, given each twiddle's canonical value.
fn mix_pairs(a0: &mut [u64], a1: &mut [u64], width: usize, mut tw: Fp, nu: Fp) {
    let one = Fp::from(1u64);
    for (x, y) in a0.chunks_exact_mut(width).zip(a1.chunks_exact_mut(width)) {
        if tw == one {
            // ν^0 = 1: no multiplication.
            dpor_butterfly::add_sub(x, y);
        } else {
            dpor_butterfly::butterflies(x, y, to_u64(tw));
        }
        tw *= nu;
    }
}

/// `HRebuildX`/`HRebuildY` of Fig. 4 on one half: from the halves of the consumed
/// levels `older` (level ℓ−1 first, down to level 0; level j has 2^j blocks) and the
/// new block `newest` (one block, already multiplied by w^{ψ(t)} for the Y half),
/// the new level's half of 2^ℓ blocks:
/// `mix(X_{ℓ−1}, mix(X_{ℓ−2}, … mix(X_0, B)))`.
///
/// Errors if a part has the wrong number of elements.
pub fn h_rebuild_half(older: &[&[Fp]], newest: &[Fp], width: usize) -> Result<Vec<Fp>, CodeError> {
    let level = older.len();
    check_blocks(newest, 1, width)?;
    for (i, part) in older.iter().enumerate() {
        check_blocks(part, 1usize << (level - 1 - i), width)?;
    }
    let total = (1usize << level) * width;
    let mut buf = Vec::with_capacity(total);
    for part in older.iter().copied().chain([newest]) {
        buf.extend(part.iter().map(|e| to_montgomery(*e)));
    }
    mix_from_tail(&mut buf, width, level)?;
    Ok(from_words(buf))
}

/// The mixes of [`h_rebuild_half`] in place: `buf` holds `[older… | newest]` (2^`level`
/// blocks of `width`) and becomes the new half, mixing the last 2, 4, …, 2^ℓ blocks.
fn mix_from_tail(buf: &mut [u64], width: usize, level: usize) -> Result<(), CodeError> {
    let total = buf.len();
    for j in 0..level {
        let span = (2usize << j) * width;
        let nu = root_of_unity(j as u32 + 1).ok_or(CodeError::TooLarge)?;
        let start = total - span;
        mix_unchecked(&mut buf[start..], width, nu);
    }
    Ok(())
}

/// `HAdd(B)` of Fig. 4: the run (`[X | Y]`, 2^(ℓ+1) blocks) of level ℓ =
/// [`target_level`]`(t)` built from the new block `record` written at time `t`
/// (0 ≤ t < N = 2^`log_blocks`) and the runs of levels 0..ℓ−1, which it consumes
/// (`consumed[j]` is level j's run, 2^(j+1) blocks). The caller empties levels 0..ℓ−1.
///
/// Errors if the runs given do not match t or have the wrong shapes.
pub fn h_add(
    t: u64,
    log_blocks: u32,
    record: &[Fp],
    consumed: &[&[Fp]],
    width: usize,
) -> Result<Vec<Fp>, CodeError> {
    let level = target_level(t);
    if consumed.len() != level as usize {
        return Err(CodeError::Levels { t, needed: level, got: consumed.len() });
    }
    check_blocks(record, 1, width)?;
    let mut xs = Vec::with_capacity(consumed.len());
    let mut ys = Vec::with_capacity(consumed.len());
    for (j, run) in consumed.iter().enumerate().rev() {
        check_blocks(run, 2usize << j, width)?;
        let (x, y) = run.split_at(run.len() / 2);
        xs.push(x);
        ys.push(y);
    }
    let tw = twist(t, log_blocks)?;
    // [X_{ℓ−1} … X_0 | B | Y_{ℓ−1} … Y_0 | w^ψ(t)·B] in the run's own buffer, each half
    // then mixed in place (`h_rebuild_half` on both halves, without a buffer per half
    // and the copy of Y after X).
    let half = width.checked_shl(level).ok_or(CodeError::TooLarge)?;
    // Montgomery words, for `dpor_butterfly`'s lanes.
    let mut run: Vec<u64> = Vec::with_capacity(half.checked_mul(2).ok_or(CodeError::TooLarge)?);
    for part in xs.iter().copied().chain([record]).chain(ys.iter().copied()) {
        run.extend(part.iter().map(|e| to_montgomery(*e)));
    }
    run.extend(record.iter().map(|e| to_montgomery(*e * tw)));
    let (x, y) = run.split_at_mut(half);
    let level = level as usize;
    // The halves are independent: X and Y on two cores for levels worth it.
    let (x, y) = if half >= PAR_MIN_ELEMENTS {
        rayon::join(|| mix_from_tail(x, width, level), || mix_from_tail(y, width, level))
    } else {
        (mix_from_tail(x, width, level), mix_from_tail(y, width, level))
    };
    x?;
    y?;
    Ok(from_words(run))
}

/// `CRebuild` (encode): C, the run of 2N blocks `[X | Y]` encoding the N records of
/// U in index order as the top level (block r counts as written at time r), so
/// X[i] = P(ω^{2i}), Y[i] = P(ω^{2i+1}) with P(x) = Σ_r U[r]·x^{ψ_k(r)}, ω = w.
///
/// Errors if `records` is not N = 2^`log_blocks` blocks of `width`.
pub fn c_rebuild(records: &[Fp], log_blocks: u32, width: usize) -> Result<Vec<Fp>, CodeError> {
    let n = 1usize.checked_shl(log_blocks).ok_or(CodeError::TooLarge)?;
    check_blocks(records, n, width)?;
    let w = root_of_unity(log_blocks + 1).ok_or(CodeError::TooLarge)?;
    // X half input: the records; Y half input: U[r]·w^{ψ_k(r)}. Blocks are independent:
    // both copies and the twist run on rayon's pool (no serial zero-fill first).
    // Montgomery words, for `dpor_butterfly`'s lanes.
    let mut run: Vec<u64> = Vec::with_capacity(2 * records.len());
    run.par_extend(records.par_iter().map(|e| to_montgomery(*e)));
    run.par_extend(records.par_iter().map(|e| to_montgomery(*e)));
    let (x, y) = run.split_at_mut(records.len());
    y.par_chunks_mut(width).enumerate().for_each(|(r, block)| {
        let tw = w.pow([bit_reverse(r as u64, log_blocks)]);
        dpor_butterfly::scale(block, to_u64(tw));
    });
    // The X and Y transforms are independent: one per core (and each splits further).
    rayon::join(|| dit_in_place(x, width), || dit_in_place(y, width));
    Ok(from_words(run))
}

/// The whole-array transform HRebuild performs incrementally: mixes of sizes 2, 4, …,
/// over blocks in write order (a decimation-in-time FFT on whole blocks).
///
/// Computed depth first: both halves are transformed (in parallel on rayon's pool
/// when large), then mixed. Each group's mix still follows the transforms of its two
/// halves, so the operations on every element are those of the stage-by-stage
/// order, and the result is identical. `buf` holds a power-of-two number of blocks,
/// at most 2^[`crate::field::TWO_ADICITY`] (checked by the callers).
pub(crate) fn dit_in_place(buf: &mut [u64], width: usize) {
    let blocks = buf.len() / width;
    if blocks < 2 {
        return;
    }
    let (lo, hi) = buf.split_at_mut(buf.len() / 2);
    if lo.len() >= PAR_MIN_ELEMENTS {
        rayon::join(|| dit_in_place(lo, width), || dit_in_place(hi, width));
    } else {
        dit_in_place(lo, width);
        dit_in_place(hi, width);
    }
    if let Some(nu) = root_of_unity(blocks.trailing_zeros()) {
        mix_unchecked(buf, width, nu);
    }
}
