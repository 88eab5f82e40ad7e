//! keccak256 of four short inputs at once.
//!
//! Every hash of the project's Merkle trees (ENCODING.md §2–4) has a one-block input:
//! a chunk leaf is 129 bytes, an inner node 65, a run leaf 41, a U leaf 73, all under
//! keccak256's rate of 136 bytes, so each costs exactly one Keccak-f[1600] permutation.
//! The trees hash thousands of independent such inputs, so four permutations can run
//! side by side in the four 64-bit lanes of AVX2 registers ([`keccak256_x4`]), about
//! several times faster than four calls of the scalar assembly (`keccak-asm`, what
//! `alloy_primitives::keccak256` uses here): the same bits, nothing in any format
//! changes.
//!
//! With AVX-512 (F, VL and BW), [`keccak256_many`] hashes eight one-block inputs per
//! permutation in 512-bit registers, loading each input's lanes straight into the
//! registers by masked byte loads and an 8 × 8 transpose (no padded state built in
//! memory), and [`keccak256_many_prefixed`] hashes `prefix ‖ input` zero-extended
//! (a chunk leaf, `0x00 ‖ chunk`) straight from the input's bytes.
//!
//! The backend is chosen once per process from the CPU's features ([`Backend::best`]):
//! AVX-512 (F, VL and BW) when the CPU has it, else AVX2, else the
//! scalar path; `DPOR_KECCAK_LANES=1` forces the scalar path and `=avx2` AVX2 (for
//! comparisons). Inputs of more than [`MAX_LANE_INPUT`] bytes take the lanes only
//! when a group's inputs all have one length (their blocks are absorbed side by side,
//! e.g. the 8 KiB segments of `dpor_proto::messages::op_hash`); otherwise the scalar
//! path.
//!
//! Source: Keccak-f[1600] and keccak256's padding (`pad10*1`, domain byte 0x01) as in
//! the Keccak reference (Bertoni, Daemen, Peeters, Van Assche, v3.0, 2011) and FIPS 202
//! §3; tested bit for bit against RustCrypto's `sha3::Keccak256`, its Keccak-f test
//! vector and `keccak-asm`.

#[cfg(target_arch = "x86_64")]
mod x86;

use std::sync::OnceLock;

/// Largest input (bytes) hashed in a lane: keccak256's rate (136 bytes) less the
/// padding's first byte. Longer inputs take the lanes only in groups of one length.
pub const MAX_LANE_INPUT: usize = 135;

/// Bytes absorbed per permutation by keccak256 (its rate, 1088 bits).
const RATE: usize = 136;

/// A keccak256 implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// One input at a time, `keccak-asm`.
    Scalar,
    /// Four inputs at once in AVX2 registers (x86-64 CPUs with AVX2 only).
    Avx2,
    /// Eight inputs at once in 512-bit registers ([`keccak256_many`]; four in 256-bit
    /// ones for [`keccak256_x4`]) with AVX-512's rotations and three-input logic
    /// (x86-64 CPUs with AVX-512 F, VL and BW only).
    Avx512,
}

impl Backend {
    /// The fastest backend this CPU runs, chosen once: [`Backend::Avx512`], else
    /// [`Backend::Avx2`], else [`Backend::Scalar`]. `DPOR_KECCAK_LANES=1` forces the
    /// scalar path, `DPOR_KECCAK_LANES=avx2` AVX2 (if the CPU has it).
    pub fn best() -> Backend {
        static BEST: OnceLock<Backend> = OnceLock::new();
        *BEST.get_or_init(|| {
            let forced = std::env::var("DPOR_KECCAK_LANES").unwrap_or_default();
            match forced.trim() {
                "1" | "scalar" => Backend::Scalar,
                "avx2" => Backend::avx2().unwrap_or(Backend::Scalar),
                _ => Backend::avx512().or(Backend::avx2()).unwrap_or(Backend::Scalar),
            }
        })
    }

    /// [`Backend::Avx2`] if this CPU has AVX2, else `None`.
    pub fn avx2() -> Option<Backend> {
        Backend::Avx2.supported().then_some(Backend::Avx2)
    }

    /// [`Backend::Avx512`] if this CPU has AVX2, AVX-512F, AVX-512VL and AVX-512BW (the
    /// byte-masked loads of one-block inputs), else `None`.
    pub fn avx512() -> Option<Backend> {
        Backend::Avx512.supported().then_some(Backend::Avx512)
    }

    /// Whether this CPU runs this backend (a cached feature check).
    pub fn supported(self) -> bool {
        match self {
            Backend::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512bw")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Inputs hashed per permutation by [`keccak256_many`]: 8 for AVX-512, 4 for
    /// AVX2, 1 for scalar.
    pub fn lanes(self) -> usize {
        match self {
            Backend::Scalar => 1,
            Backend::Avx2 => 4,
            Backend::Avx512 => 8,
        }
    }
}

/// keccak256 of one input (any length), by `keccak-asm`.
pub fn keccak256(input: &[u8]) -> [u8; 32] {
    keccak_asm::Keccak256::digest(input).into()
}

/// keccak256 of four inputs (any lengths) with the [best](Backend::best) backend.
pub fn keccak256_x4(inputs: [&[u8]; 4]) -> [[u8; 32]; 4] {
    keccak256_x4_with(Backend::best(), inputs)
}

/// keccak256 of four inputs (any lengths) with `backend`. A backend this CPU does not
/// run ([`Backend::supported`]) computes the same hashes on the scalar path, as do
/// inputs over [`MAX_LANE_INPUT`] bytes unless all four have one length.
pub fn keccak256_x4_with(backend: Backend, inputs: [&[u8]; 4]) -> [[u8; 32]; 4] {
    if backend != Backend::Scalar && !fit_lanes(&inputs) && equal_lengths(&inputs) && backend.supported() {
        #[cfg(target_arch = "x86_64")]
        return absorb_x4(backend, inputs);
    }
    if backend != Backend::Scalar && fit_lanes(&inputs) && backend.supported() {
        let mut states = padded_states(&inputs);
        #[cfg(target_arch = "x86_64")]
        match backend {
            // SAFETY: the CPU has AVX2 (`supported`, a cached check, just above).
            Backend::Avx2 => unsafe { x86::permute_x4_avx2(&mut states, RATE / 8, 4) },
            // SAFETY: the CPU has AVX2, AVX-512F and AVX-512VL (`supported`).
            Backend::Avx512 => unsafe { x86::permute_x4_avx512(&mut states, RATE / 8, 4) },
            Backend::Scalar => {}
        }
        return digests_of(&states);
    }
    inputs.map(keccak256)
}

/// keccak256 of eight inputs at once in 512-bit registers, if `backend` is
/// [`Backend::Avx512`], the CPU runs it and every input fits a lane; else `None`.
fn keccak256_x8_avx512(backend: Backend, inputs: [&[u8]; 8]) -> Option<[[u8; 32]; 8]> {
    if backend != Backend::Avx512 || !backend.supported() {
        return None;
    }
    if !fit_lanes(&inputs) {
        if !equal_lengths(&inputs) {
            return None;
        }
        #[cfg(target_arch = "x86_64")]
        return Some(absorb_x8(inputs));
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the CPU has AVX-512F and AVX-512BW (`supported`, just above), and
        // every input fits one block (`fit_lanes`).
        Some(unsafe { x86::keccak256_x8_one_block(&inputs, None, 0) })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

fn fit_lanes(inputs: &[&[u8]]) -> bool {
    inputs.iter().all(|i| i.len() <= MAX_LANE_INPUT)
}

fn equal_lengths(inputs: &[&[u8]]) -> bool {
    inputs.windows(2).all(|w| w[0].len() == w[1].len())
}

/// Block `b` of `input` as the first 17 lanes of a state: a whole 136-byte block, or,
/// for the last block (b = len / 136), the tail padded ([`padded_block`]).
#[inline]
fn block_lanes(input: &[u8], b: usize) -> [u64; 25] {
    let start = b * RATE;
    if start + RATE <= input.len() && b < input.len() / RATE {
        let mut lanes = [0u64; 25];
        for (l, w) in lanes.iter_mut().zip(input[start..start + RATE].chunks_exact(8)) {
            *l = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        }
        lanes
    } else {
        padded_block(&input[start.min(input.len())..])
    }
}

/// keccak256 of eight inputs of one length (any, several blocks) in 512-bit registers:
/// each block is xored into its state and the eight states permuted together.
#[cfg(target_arch = "x86_64")]
fn absorb_x8(inputs: [&[u8]; 8]) -> [[u8; 32]; 8] {
    let blocks = inputs[0].len() / RATE + 1;
    let mut states = [[0u64; 25]; 8];
    for b in 0..blocks {
        for (st, input) in states.iter_mut().zip(inputs) {
            for (s, l) in st.iter_mut().zip(block_lanes(input, b).iter().take(RATE / 8)) {
                *s ^= l;
            }
        }
        let out = if b + 1 == blocks { 4 } else { 25 };
        // SAFETY: the caller checked that the CPU has AVX2, AVX-512F and AVX-512VL.
        unsafe { x86::permute_x8_avx512(&mut states, 25, out) };
    }
    digests_of(&states)
}

/// [`absorb_x8`] for four inputs with `backend` (AVX2 or AVX-512VL).
#[cfg(target_arch = "x86_64")]
fn absorb_x4(backend: Backend, inputs: [&[u8]; 4]) -> [[u8; 32]; 4] {
    let blocks = inputs[0].len() / RATE + 1;
    let mut states = [[0u64; 25]; 4];
    for b in 0..blocks {
        for (st, input) in states.iter_mut().zip(inputs) {
            for (s, l) in st.iter_mut().zip(block_lanes(input, b).iter().take(RATE / 8)) {
                *s ^= l;
            }
        }
        let out = if b + 1 == blocks { 4 } else { 25 };
        match backend {
            // SAFETY: the caller checked that the CPU has AVX2.
            Backend::Avx2 => unsafe { x86::permute_x4_avx2(&mut states, 25, out) },
            // SAFETY: the caller checked that the CPU has AVX2, AVX-512F and AVX-512VL.
            Backend::Avx512 => unsafe { x86::permute_x4_avx512(&mut states, 25, out) },
            Backend::Scalar => return inputs.map(keccak256),
        }
    }
    digests_of(&states)
}

/// The digests of `N` states ([`digest_of`]), written in place: `array::map` over
/// the states copied all of them first (a `memcpy` of 1,600 bytes per eight hashes,
/// ≈ 4 % of a batched write's CPU, issue 23).
#[inline]
fn digests_of<const N: usize>(states: &[[u64; 25]; N]) -> [[u8; 32]; N] {
    let mut out = [[0u8; 32]; N];
    for (o, s) in out.iter_mut().zip(states) {
        *o = digest_of(s);
    }
    out
}

/// keccak256's 32 bytes: the first four lanes of a state, little-endian.
fn digest_of(state: &[u64; 25]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (o, w) in out.chunks_exact_mut(8).zip(state) {
        o.copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// keccak256 of many inputs (any lengths) into `out` with the [best](Backend::best)
/// backend: eight at a time with AVX-512, four with AVX2.
///
/// # Panics
/// If `out` and `inputs` differ in length (a caller's bug).
pub fn keccak256_many(inputs: &[&[u8]], out: &mut [[u8; 32]]) {
    keccak256_many_with(Backend::best(), inputs, out);
}

/// [`keccak256_many`] with `backend`. A last group of two or three inputs fills the
/// spare lanes with copies; a last single input takes the scalar path.
///
/// # Panics
/// If `out` and `inputs` differ in length (a caller's bug).
pub fn keccak256_many_with(backend: Backend, inputs: &[&[u8]], out: &mut [[u8; 32]]) {
    assert_eq!(inputs.len(), out.len(), "keccak256_many: one output per input");
    let n = inputs.len();
    let mut i = 0;
    if backend == Backend::Avx512 {
        while i + 8 <= n {
            let group: [&[u8]; 8] = std::array::from_fn(|l| inputs[i + l]);
            match keccak256_x8_avx512(backend, group) {
                Some(h) => out[i..i + 8].copy_from_slice(&h),
                None => break,
            }
            i += 8;
        }
    }
    while i + 4 <= n {
        let group: [&[u8]; 4] = std::array::from_fn(|l| inputs[i + l]);
        out[i..i + 4].copy_from_slice(&keccak256_x4_with(backend, group));
        i += 4;
    }
    let rest = n - i;
    if rest >= 2 && backend != Backend::Scalar {
        let group: [&[u8]; 4] = std::array::from_fn(|l| inputs[i + l.min(rest - 1)]);
        out[i..].copy_from_slice(&keccak256_x4_with(backend, group)[..rest]);
    } else {
        for (o, input) in out[i..].iter_mut().zip(&inputs[i..]) {
            *o = keccak256(input);
        }
    }
}

/// keccak256 of `prefix ‖ input`, zero-extended to at least `min_len` bytes, for each
/// input, in order, into `out`, with the [best](Backend::best) backend: the leaves of
/// a chunk tree (`0x00 ‖ chunk`, the chunk zero-padded to 128 bytes) hashed straight
/// from the block's bytes, without a prefixed copy of each (issue 23).
///
/// # Panics
/// If `out` and `inputs` differ in length (a caller's bug).
pub fn keccak256_many_prefixed(prefix: u8, min_len: usize, inputs: &[&[u8]], out: &mut [[u8; 32]]) {
    keccak256_many_prefixed_with(Backend::best(), prefix, min_len, inputs, out);
}

/// [`keccak256_many_prefixed`] with `backend`. With AVX-512, groups of eight messages
/// of one block each are loaded from the inputs in place; any other message (the last
/// group of fewer than eight, a longer one, another backend) is built in a buffer and
/// hashed by [`keccak256_many_with`].
///
/// # Panics
/// If `out` and `inputs` differ in length (a caller's bug).
pub fn keccak256_many_prefixed_with(backend: Backend, prefix: u8, min_len: usize, inputs: &[&[u8]], out: &mut [[u8; 32]]) {
    assert_eq!(inputs.len(), out.len(), "keccak256_many_prefixed: one output per input");
    // Inputs before `i` are hashed in lanes (x86-64 only; elsewhere every input goes
    // through the path below).
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if backend == Backend::Avx512 && backend.supported() {
        let n = inputs.len();
        let fits = |x: &&[u8]| x.len().saturating_add(1).max(min_len) <= MAX_LANE_INPUT;
        while i + 8 <= n && inputs[i..i + 8].iter().all(fits) {
            let group: [&[u8]; 8] = std::array::from_fn(|l| inputs[i + l]);
            // SAFETY: the CPU has AVX-512F and AVX-512BW (`supported`, just above), and
            // every message fits one block (`fits`).
            out[i..i + 8].copy_from_slice(&unsafe { x86::keccak256_x8_one_block(&group, Some(prefix), min_len) });
            i += 8;
        }
    }
    let messages: Vec<Vec<u8>> = inputs[i..]
        .iter()
        .map(|x| {
            let mut m = vec![0u8; x.len().saturating_add(1).max(min_len)];
            m[0] = prefix;
            m[1..1 + x.len()].copy_from_slice(x);
            m
        })
        .collect();
    let refs: Vec<&[u8]> = messages.iter().map(|m| m.as_slice()).collect();
    keccak256_many_with(backend, &refs, &mut out[i..]);
}

/// One input of at most [`MAX_LANE_INPUT`] bytes padded to one keccak256 block (the
/// domain byte 0x01 after the input, 0x80 in the last byte), as the first 17
/// little-endian 64-bit lanes of a state (the other 8 zero).
///
/// Whole 8-byte words are loaded as lanes and the tail assembled byte by byte: no
/// copy through a padded byte buffer (a variable-length `memcpy` call per hash was
/// ≈ 6 % of a batched write's CPU, issue 23).
#[inline]
fn padded_block(input: &[u8]) -> [u64; 25] {
    let mut lanes = [0u64; 25];
    pad_into(&mut lanes, input);
    lanes
}

/// [`padded_block`] of each input, built in place in one array of states (no copy
/// of each state into it, as `array::map` made).
#[inline]
fn padded_states<const N: usize>(inputs: &[&[u8]; N]) -> [[u64; 25]; N] {
    let mut states = [[0u64; 25]; N];
    for (s, input) in states.iter_mut().zip(inputs) {
        pad_into(s, input);
    }
    states
}

/// [`padded_block`] into `lanes`, which must be all zero.
#[inline]
fn pad_into(lanes: &mut [u64; 25], input: &[u8]) {
    debug_assert!(input.len() <= MAX_LANE_INPUT);
    let words = input.chunks_exact(8);
    let tail = words.remainder();
    let full = input.len() / 8;
    for (lane, w) in lanes.iter_mut().zip(words) {
        *lane = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
    }
    let mut last = 0u64;
    for (j, b) in tail.iter().enumerate() {
        last |= u64::from(*b) << (8 * j);
    }
    // The domain byte 0x01 right after the input (tail.len() < 8, full ≤ 16).
    last |= 0x01 << (8 * tail.len());
    lanes[full] ^= last;
    lanes[RATE / 8 - 1] ^= 0x80 << 56;
}

/// The round constants of Keccak-f[1600] (ι), rounds 0..24.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const ROUND_CONSTANTS: [u64; 24] = [
    0x0000_0000_0000_0001, 0x0000_0000_0000_8082, 0x8000_0000_0000_808A, 0x8000_0000_8000_8000,
    0x0000_0000_0000_808B, 0x0000_0000_8000_0001, 0x8000_0000_8000_8081, 0x8000_0000_0000_8009,
    0x0000_0000_0000_008A, 0x0000_0000_0000_0088, 0x0000_0000_8000_8009, 0x0000_0000_8000_000A,
    0x0000_0000_8000_808B, 0x8000_0000_0000_008B, 0x8000_0000_0000_8089, 0x8000_0000_0000_8003,
    0x8000_0000_0000_8002, 0x8000_0000_0000_0080, 0x0000_0000_0000_800A, 0x8000_0000_8000_000A,
    0x8000_0000_8000_8081, 0x8000_0000_0000_8080, 0x0000_0000_8000_0001, 0x8000_0000_8000_8008,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_of_the_empty_input_and_of_a_full_lane_input() {
        let p = padded_block(&[]);
        assert_eq!(p[0], 0x01);
        assert_eq!(p[16], 0x80 << 56);
        let p = padded_block(&[0xAA; MAX_LANE_INPUT]);
        assert_eq!(p[16], 0x81AA_AAAA_AAAA_AAAA, "0x01 and 0x80 share the last byte");
    }

    #[test]
    fn scalar_forced_or_not_the_same_hashes() {
        let ins: [&[u8]; 4] = [b"", b"abc", &[7u8; 135], &[9u8; 300]];
        let want = ins.map(keccak256);
        assert_eq!(keccak256_x4_with(Backend::Scalar, ins), want);
        assert_eq!(keccak256_x4_with(Backend::Avx2, ins), want, "one long input: all four scalar");
        assert_eq!(keccak256_x4_with(Backend::Avx512, ins), want);
        assert_eq!(keccak256_x4(ins), want);
    }

    /// Inputs of one length over a block (several absorbed blocks in the lanes), at
    /// lengths around the block edges, against keccak-asm, on every backend this CPU runs.
    #[test]
    fn equal_multi_block_inputs_in_lanes() {
        for len in [136usize, 137, 271, 272, 273, 1000, 8192] {
            let data: Vec<Vec<u8>> = (0..11).map(|i| (0..len).map(|j| (j * 31 + i * 7 + len) as u8).collect()).collect();
            let ins: Vec<&[u8]> = data.iter().map(|v| v.as_slice()).collect();
            let want: Vec<[u8; 32]> = ins.iter().map(|i| keccak256(i)).collect();
            for backend in [Backend::Scalar, Backend::Avx2, Backend::Avx512] {
                let mut out = vec![[0u8; 32]; ins.len()];
                keccak256_many_with(backend, &ins, &mut out);
                assert_eq!(out, want, "length {len}, {backend:?}");
                let four: [&[u8]; 4] = [ins[0], ins[1], ins[2], ins[3]];
                assert_eq!(keccak256_x4_with(backend, four).to_vec(), want[..4].to_vec(), "length {len}, {backend:?}, four");
            }
        }
    }
}
