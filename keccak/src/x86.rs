//! Four Keccak-f[1600] permutations side by side: state lane i of input l in 64-bit
//! lane l of 256-bit register i (25 registers). Two instruction sets, one round
//! ([`keccak_rounds!`]):
//! - AVX2: χ's `¬a ∧ b` is `vpandn`; a rotation is a shift pair and an or.
//! - AVX-512 (F + VL): a rotation is one `vprolq`, θ's five-way parity two
//!   `vpternlogq` and χ one, and 32 registers hold more of the state; on 256-bit
//!   registers (four states) or 512-bit ones (eight states, `permute_x8_avx512`).
//!
//! Called only after the CPU's features were detected at run time.

use super::ROUND_CONSTANTS;
use std::arch::x86_64::{
    __m256i, __m512i, _mm512_extracti64x4_epi64, _mm512_loadu_si512, _mm512_maskz_loadu_epi8, _mm512_maskz_set1_epi8,
    _mm512_shuffle_i64x2, _mm512_storeu_si512, _mm512_unpackhi_epi64, _mm512_unpacklo_epi64, _mm512_rol_epi64, _mm512_set1_epi64, _mm512_set_epi64,
    _mm512_setzero_si512, _mm512_ternarylogic_epi64, _mm512_xor_si512, _mm256_andnot_si256, _mm256_extract_epi64, _mm256_or_si256, _mm256_rol_epi64, _mm256_set1_epi64x,
    _mm256_set_epi64x, _mm256_setzero_si256, _mm256_slli_epi64, _mm256_srli_epi64, _mm256_ternarylogic_epi64,
    _mm256_xor_si256,
};

/// AVX2: each 64-bit lane of `$x` rotated left by the literal `$n` (1..=63).
macro_rules! rotl_avx2 {
    ($x:expr, $n:literal) => {
        _mm256_or_si256(_mm256_slli_epi64::<$n>($x), _mm256_srli_epi64::<{ 64 - $n }>($x))
    };
}

/// AVX-512VL: each 64-bit lane of `$x` rotated left by the literal `$n`.
macro_rules! rotl_avx512 {
    ($x:expr, $n:literal) => {
        _mm256_rol_epi64::<$n>($x)
    };
}

/// AVX2: `$a ⊕ $b ⊕ $c`.
macro_rules! xor3_avx2 {
    ($a:expr, $b:expr, $c:expr) => {
        _mm256_xor_si256(_mm256_xor_si256($a, $b), $c)
    };
}

/// AVX-512VL: `$a ⊕ $b ⊕ $c` in one instruction (truth table 0x96).
macro_rules! xor3_avx512 {
    ($a:expr, $b:expr, $c:expr) => {
        _mm256_ternarylogic_epi64::<0x96>($a, $b, $c)
    };
}

/// AVX2: χ's `$a ⊕ (¬$b ∧ $c)`.
macro_rules! chi_avx2 {
    ($a:expr, $b:expr, $c:expr) => {
        _mm256_xor_si256($a, _mm256_andnot_si256($b, $c))
    };
}

/// AVX-512VL: χ's `$a ⊕ (¬$b ∧ $c)` in one instruction (truth table 0xD2).
macro_rules! chi_avx512 {
    ($a:expr, $b:expr, $c:expr) => {
        _mm256_ternarylogic_epi64::<0xD2>($a, $b, $c)
    };
}

/// AVX-512F, 512-bit: each 64-bit lane of `$x` rotated left by the literal `$n`.
macro_rules! rotl_zmm {
    ($x:expr, $n:literal) => {
        _mm512_rol_epi64::<$n>($x)
    };
}

/// AVX-512F, 512-bit: `$a ⊕ $b ⊕ $c`.
macro_rules! xor3_zmm {
    ($a:expr, $b:expr, $c:expr) => {
        _mm512_ternarylogic_epi64::<0x96>($a, $b, $c)
    };
}

/// AVX-512F, 512-bit: χ's `$a ⊕ (¬$b ∧ $c)`.
macro_rules! chi_zmm {
    ($a:expr, $b:expr, $c:expr) => {
        _mm512_ternarylogic_epi64::<0xD2>($a, $b, $c)
    };
}

/// The 24 rounds of Keccak-f[1600] (θ, ρ and π, χ, ι) on `$a`, 25 registers, with
/// the given rotation, three-way xor and χ macros and the registers' xor and
/// broadcast functions.
macro_rules! keccak_rounds {
    ($a:ident, $rot:ident, $xor3:ident, $chi:ident, $xor:ident, $set1:ident) => {
        for rc in ROUND_CONSTANTS {
            // θ: each column's parity, mixed into its neighbours' columns.
            let c0 = $xor3!($xor3!($a[0], $a[5], $a[10]), $a[15], $a[20]);
            let c1 = $xor3!($xor3!($a[1], $a[6], $a[11]), $a[16], $a[21]);
            let c2 = $xor3!($xor3!($a[2], $a[7], $a[12]), $a[17], $a[22]);
            let c3 = $xor3!($xor3!($a[3], $a[8], $a[13]), $a[18], $a[23]);
            let c4 = $xor3!($xor3!($a[4], $a[9], $a[14]), $a[19], $a[24]);
            let d0 = $xor(c4, $rot!(c1, 1));
            let d1 = $xor(c0, $rot!(c2, 1));
            let d2 = $xor(c1, $rot!(c3, 1));
            let d3 = $xor(c2, $rot!(c4, 1));
            let d4 = $xor(c3, $rot!(c0, 1));
            $a[0] = $xor($a[0], d0);
            $a[1] = $xor($a[1], d1);
            $a[2] = $xor($a[2], d2);
            $a[3] = $xor($a[3], d3);
            $a[4] = $xor($a[4], d4);
            $a[5] = $xor($a[5], d0);
            $a[6] = $xor($a[6], d1);
            $a[7] = $xor($a[7], d2);
            $a[8] = $xor($a[8], d3);
            $a[9] = $xor($a[9], d4);
            $a[10] = $xor($a[10], d0);
            $a[11] = $xor($a[11], d1);
            $a[12] = $xor($a[12], d2);
            $a[13] = $xor($a[13], d3);
            $a[14] = $xor($a[14], d4);
            $a[15] = $xor($a[15], d0);
            $a[16] = $xor($a[16], d1);
            $a[17] = $xor($a[17], d2);
            $a[18] = $xor($a[18], d3);
            $a[19] = $xor($a[19], d4);
            $a[20] = $xor($a[20], d0);
            $a[21] = $xor($a[21], d1);
            $a[22] = $xor($a[22], d2);
            $a[23] = $xor($a[23], d3);
            $a[24] = $xor($a[24], d4);
            // ρ and π: B[y, 2x + 3y] = rot(A[x, y], r[x, y]), lane index x + 5y.
            let a = &$a;
            let mut b = [$a[0]; 25];
            b[0] = a[0];
            b[16] = $rot!(a[5], 36);
            b[7] = $rot!(a[10], 3);
            b[23] = $rot!(a[15], 41);
            b[14] = $rot!(a[20], 18);
            b[10] = $rot!(a[1], 1);
            b[1] = $rot!(a[6], 44);
            b[17] = $rot!(a[11], 10);
            b[8] = $rot!(a[16], 45);
            b[24] = $rot!(a[21], 2);
            b[20] = $rot!(a[2], 62);
            b[11] = $rot!(a[7], 6);
            b[2] = $rot!(a[12], 43);
            b[18] = $rot!(a[17], 15);
            b[9] = $rot!(a[22], 61);
            b[5] = $rot!(a[3], 28);
            b[21] = $rot!(a[8], 55);
            b[12] = $rot!(a[13], 25);
            b[3] = $rot!(a[18], 21);
            b[19] = $rot!(a[23], 56);
            b[15] = $rot!(a[4], 27);
            b[6] = $rot!(a[9], 20);
            b[22] = $rot!(a[14], 39);
            b[13] = $rot!(a[19], 8);
            b[4] = $rot!(a[24], 14);
            // χ: each row mixed non-linearly.
            $a[0] = $chi!(b[0], b[1], b[2]);
            $a[1] = $chi!(b[1], b[2], b[3]);
            $a[2] = $chi!(b[2], b[3], b[4]);
            $a[3] = $chi!(b[3], b[4], b[0]);
            $a[4] = $chi!(b[4], b[0], b[1]);
            $a[5] = $chi!(b[5], b[6], b[7]);
            $a[6] = $chi!(b[6], b[7], b[8]);
            $a[7] = $chi!(b[7], b[8], b[9]);
            $a[8] = $chi!(b[8], b[9], b[5]);
            $a[9] = $chi!(b[9], b[5], b[6]);
            $a[10] = $chi!(b[10], b[11], b[12]);
            $a[11] = $chi!(b[11], b[12], b[13]);
            $a[12] = $chi!(b[12], b[13], b[14]);
            $a[13] = $chi!(b[13], b[14], b[10]);
            $a[14] = $chi!(b[14], b[10], b[11]);
            $a[15] = $chi!(b[15], b[16], b[17]);
            $a[16] = $chi!(b[16], b[17], b[18]);
            $a[17] = $chi!(b[17], b[18], b[19]);
            $a[18] = $chi!(b[18], b[19], b[15]);
            $a[19] = $chi!(b[19], b[15], b[16]);
            $a[20] = $chi!(b[20], b[21], b[22]);
            $a[21] = $chi!(b[21], b[22], b[23]);
            $a[22] = $chi!(b[22], b[23], b[24]);
            $a[23] = $chi!(b[23], b[24], b[20]);
            $a[24] = $chi!(b[24], b[20], b[21]);
            // ι
            $a[0] = $xor($a[0], $set1(rc as i64));
        }
    };
}

/// Keccak-f[1600] on four states with AVX2.
#[target_feature(enable = "avx2")]
fn permute_avx2(state: &mut [__m256i; 25]) {
    keccak_rounds!(state, rotl_avx2, xor3_avx2, chi_avx2, _mm256_xor_si256, _mm256_set1_epi64x);
}

/// Keccak-f[1600] on four states with AVX-512 F and VL.
#[target_feature(enable = "avx2,avx512f,avx512vl")]
fn permute_avx512(state: &mut [__m256i; 25]) {
    keccak_rounds!(state, rotl_avx512, xor3_avx512, chi_avx512, _mm256_xor_si256, _mm256_set1_epi64x);
}

/// Keccak-f[1600] on eight states with AVX-512F (512-bit registers).
#[target_feature(enable = "avx512f")]
fn permute_zmm(state: &mut [__m512i; 25]) {
    keccak_rounds!(state, rotl_zmm, xor3_zmm, chi_zmm, _mm512_xor_si512, _mm512_set1_epi64);
}

/// [`permute_x4_avx2`] for eight states in 512-bit registers with AVX-512F.
///
/// Only for CPUs with AVX-512F: the caller checks.
#[target_feature(enable = "avx2,avx512f")]
pub(crate) fn permute_x8_avx512(states: &mut [[u64; 25]; 8], lanes_in: usize, lanes_out: usize) {
    let mut a = [_mm512_setzero_si512(); 25];
    for (i, ai) in a.iter_mut().take(lanes_in).enumerate() {
        let s = |l: usize| states[l][i] as i64;
        *ai = _mm512_set_epi64(s(7), s(6), s(5), s(4), s(3), s(2), s(1), s(0));
    }
    permute_zmm(&mut a);
    for (i, reg) in a.iter().take(lanes_out).enumerate() {
        let halves = [_mm512_extracti64x4_epi64::<0>(*reg), _mm512_extracti64x4_epi64::<1>(*reg)];
        for (h, half) in halves.iter().enumerate() {
            states[4 * h][i] = _mm256_extract_epi64::<0>(*half) as u64;
            states[4 * h + 1][i] = _mm256_extract_epi64::<1>(*half) as u64;
            states[4 * h + 2][i] = _mm256_extract_epi64::<2>(*half) as u64;
            states[4 * h + 3][i] = _mm256_extract_epi64::<3>(*half) as u64;
        }
    }
}

/// keccak256 of eight messages of one block each: message l is `prefix ‖ inputs[l]`
/// (no prefix byte when `prefix` is `None`) zero-extended to at least `min_len` bytes,
/// and every message at most [`super::MAX_LANE_INPUT`] (135) bytes. The block's 17
/// lanes are loaded from the inputs straight into the registers and the digests taken
/// straight out of them: no padded states (or prefixed copies of the inputs) in
/// memory (issue 23: building and copying the eight 200-byte states cost about half
/// as much as the permutation itself).
///
/// Each message's bytes 0..64 and 64..128 are read by masked byte loads (AVX-512BW: the
/// bytes outside the input are neither read nor faulted on), the eight rows transposed
/// in registers (lane i of message l in lane l of register i); lane 16 (bytes
/// 128..135) is assembled byte by byte. The prefix and the padding (0x01 after the
/// message, 0x80 in byte 135) are xored in as in [`super::padded_block`].
///
/// Only for CPUs with AVX-512F and AVX-512BW, and messages of at most 135 bytes: the
/// caller checks both (an input that would make a longer message is cut, never read
/// past).
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) fn keccak256_x8_one_block(inputs: &[&[u8]; 8], prefix: Option<u8>, min_len: usize) -> [[u8; 32]; 8] {
    let off = usize::from(prefix.is_some());
    let mut low = [_mm512_setzero_si512(); 8];
    let mut high = [_mm512_setzero_si512(); 8];
    let mut lane16 = [0u64; 8];
    for (l, input) in inputs.iter().enumerate() {
        let input = &input[..input.len().min(super::MAX_LANE_INPUT - off)];
        let end = off + input.len();
        let len = end.max(min_len).min(super::MAX_LANE_INPUT);
        // Byte j of row k is message byte 64k + j, i.e. input byte 64k + j − off.
        let p = input.as_ptr().cast::<i8>();
        // SAFETY: only the bytes whose mask bit is set are read: message bytes off..end
        // of each row, which are the input's bytes (the wrapping pointers are not read
        // through outside them).
        unsafe {
            low[l] = _mm512_maskz_loadu_epi8(byte_mask(end) & !byte_mask(off), p.wrapping_sub(off));
            high[l] = _mm512_maskz_loadu_epi8(byte_mask(end.saturating_sub(64)), p.wrapping_add(64).wrapping_sub(off));
        }
        if let Some(b) = prefix {
            low[l] = _mm512_xor_si512(low[l], _mm512_maskz_set1_epi8(1, b as i8));
        }
        let mut last = 0u64;
        for (j, b) in input.iter().skip(128 - off).enumerate() {
            last |= u64::from(*b) << (8 * j);
        }
        // The domain byte 0x01 right after the message.
        match len {
            0..64 => low[l] = _mm512_xor_si512(low[l], _mm512_maskz_set1_epi8(1u64 << len, 1)),
            64..128 => high[l] = _mm512_xor_si512(high[l], _mm512_maskz_set1_epi8(1u64 << (len - 64), 1)),
            _ => last |= 0x01 << (8 * (len - 128)),
        }
        lane16[l] = last;
    }
    let mut a = [_mm512_setzero_si512(); 25];
    a[..8].copy_from_slice(&transpose8(&low));
    a[8..16].copy_from_slice(&transpose8(&high));
    // SAFETY: `lane16` is 64 readable bytes.
    a[16] = _mm512_xor_si512(unsafe { _mm512_loadu_si512(lane16.as_ptr().cast()) }, _mm512_set1_epi64((0x80u64 << 56) as i64));
    permute_zmm(&mut a);
    let mut words = [[0u64; 8]; 4];
    for (w, reg) in words.iter_mut().zip(&a) {
        // SAFETY: `w` is 64 writable bytes.
        unsafe { _mm512_storeu_si512(w.as_mut_ptr().cast(), *reg) };
    }
    let mut out = [[0u8; 32]; 8];
    for (l, o) in out.iter_mut().enumerate() {
        for (i, chunk) in o.chunks_exact_mut(8).enumerate() {
            chunk.copy_from_slice(&words[i][l].to_le_bytes());
        }
    }
    out
}

/// The mask of the first `n` bytes of 64 (all of them for n ≥ 64).
#[inline]
fn byte_mask(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// The 8 × 8 transpose of 64-bit words: word i of row l becomes word l of row i.
#[target_feature(enable = "avx512f")]
fn transpose8(r: &[__m512i; 8]) -> [__m512i; 8] {
    // Pairs of rows interleaved: t[2m] = (r[2m][0], r[2m+1][0], r[2m][2], r[2m+1][2], …),
    // t[2m+1] the odd words.
    let t = [
        _mm512_unpacklo_epi64(r[0], r[1]),
        _mm512_unpackhi_epi64(r[0], r[1]),
        _mm512_unpacklo_epi64(r[2], r[3]),
        _mm512_unpackhi_epi64(r[2], r[3]),
        _mm512_unpacklo_epi64(r[4], r[5]),
        _mm512_unpackhi_epi64(r[4], r[5]),
        _mm512_unpacklo_epi64(r[6], r[7]),
        _mm512_unpackhi_epi64(r[6], r[7]),
    ];
    // 128-bit lanes 0, 2 (0x88) or 1, 3 (0xDD) of the first operand, then of the second.
    let u = [
        _mm512_shuffle_i64x2::<0x88>(t[0], t[2]),
        _mm512_shuffle_i64x2::<0xDD>(t[0], t[2]),
        _mm512_shuffle_i64x2::<0x88>(t[1], t[3]),
        _mm512_shuffle_i64x2::<0xDD>(t[1], t[3]),
        _mm512_shuffle_i64x2::<0x88>(t[4], t[6]),
        _mm512_shuffle_i64x2::<0xDD>(t[4], t[6]),
        _mm512_shuffle_i64x2::<0x88>(t[5], t[7]),
        _mm512_shuffle_i64x2::<0xDD>(t[5], t[7]),
    ];
    [
        _mm512_shuffle_i64x2::<0x88>(u[0], u[4]),
        _mm512_shuffle_i64x2::<0x88>(u[2], u[6]),
        _mm512_shuffle_i64x2::<0x88>(u[1], u[5]),
        _mm512_shuffle_i64x2::<0x88>(u[3], u[7]),
        _mm512_shuffle_i64x2::<0xDD>(u[0], u[4]),
        _mm512_shuffle_i64x2::<0xDD>(u[2], u[6]),
        _mm512_shuffle_i64x2::<0xDD>(u[1], u[5]),
        _mm512_shuffle_i64x2::<0xDD>(u[3], u[7]),
    ]
}

/// Four states in registers: lane i of state l in lane l of register i.
#[target_feature(enable = "avx2")]
fn load(states: &[[u64; 25]; 4], lanes: usize) -> [__m256i; 25] {
    let mut a = [_mm256_setzero_si256(); 25];
    for (i, ai) in a.iter_mut().take(lanes).enumerate() {
        *ai = _mm256_set_epi64x(states[3][i] as i64, states[2][i] as i64, states[1][i] as i64, states[0][i] as i64);
    }
    a
}

/// The first `lanes` lanes of each of the four states in `a`.
#[target_feature(enable = "avx2")]
fn store(a: &[__m256i; 25], lanes: usize, states: &mut [[u64; 25]; 4]) {
    for (i, reg) in a.iter().take(lanes).enumerate() {
        states[0][i] = _mm256_extract_epi64::<0>(*reg) as u64;
        states[1][i] = _mm256_extract_epi64::<1>(*reg) as u64;
        states[2][i] = _mm256_extract_epi64::<2>(*reg) as u64;
        states[3][i] = _mm256_extract_epi64::<3>(*reg) as u64;
    }
}

/// Keccak-f[1600] on four whole states with AVX2, or the first `lanes` lanes of them
/// (the rest zero): the permutation of one-block keccak256 hashes needs 17 lanes in
/// and 4 out.
///
/// Only for CPUs with AVX2: the caller checks (`is_x86_feature_detected!`).
#[target_feature(enable = "avx2")]
pub(crate) fn permute_x4_avx2(states: &mut [[u64; 25]; 4], lanes_in: usize, lanes_out: usize) {
    let mut a = load(states, lanes_in);
    permute_avx2(&mut a);
    store(&a, lanes_out, states);
}

/// [`permute_x4_avx2`] with AVX-512 F and VL.
///
/// Only for CPUs with AVX2, AVX-512F and AVX-512VL: the caller checks.
#[target_feature(enable = "avx2,avx512f,avx512vl")]
pub(crate) fn permute_x4_avx512(states: &mut [[u64; 25]; 4], lanes_in: usize, lanes_out: usize) {
    let mut a = load(states, lanes_in);
    permute_avx512(&mut a);
    store(&a, lanes_out, states);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four states, each permuted by RustCrypto's `keccak::f1600` and by ours.
    #[test]
    fn four_permutations_equal_the_reference_one_by_one() {
        let mut states = [[0u64; 25]; 4];
        for (l, s) in states.iter_mut().enumerate().skip(1) {
            for (i, w) in s.iter_mut().enumerate() {
                *w = (l as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(i as u32) ^ i as u64;
            }
        }
        let mut want = states;
        let k = keccak::Keccak::new();
        for s in want.iter_mut() {
            k.with_f1600(|f| f(s));
        }
        // The zero state's first permutation is the Keccak team's vector.
        assert_eq!(want[0][0], 0xF125_8F79_40E1_DDE7);
        assert_eq!(want[0][24], 0xEAF1_FF7B_5CEC_A249);
        let mut ran = 0;
        if std::arch::is_x86_feature_detected!("avx2") {
            let mut s = states;
            // SAFETY: AVX2 detected just above.
            unsafe { permute_x4_avx2(&mut s, 25, 25) };
            assert_eq!(s, want, "AVX2");
            ran += 1;
        }
        if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512vl") {
            let mut s = states;
            // SAFETY: AVX2 (every AVX-512 CPU has it), AVX-512F and VL detected.
            unsafe { permute_x4_avx512(&mut s, 25, 25) };
            assert_eq!(s, want, "AVX-512");
            let mut eight = [states[0], states[1], states[2], states[3], states[3], states[2], states[1], states[0]];
            // SAFETY: as above (AVX-512F detected).
            unsafe { permute_x8_avx512(&mut eight, 25, 25) };
            assert_eq!(eight, [want[0], want[1], want[2], want[3], want[3], want[2], want[1], want[0]], "AVX-512, 8 lanes");
            ran += 1;
        }
        eprintln!("{ran} lane backends checked on this CPU");
    }
}
