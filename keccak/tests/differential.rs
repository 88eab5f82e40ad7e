//! keccak256 by the lanes against RustCrypto's `sha3::Keccak256` (an implementation we
//! did not write, independent of `keccak-asm`): every input length 0..=200 (one-block
//! and multi-block inputs, the padding's edge at 135 and 136 bytes), random inputs, and
//! the published vectors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dpor_keccak::{
    keccak256, keccak256_many, keccak256_many_prefixed, keccak256_many_prefixed_with, keccak256_many_with, keccak256_x4, keccak256_x4_with, Backend,
    MAX_LANE_INPUT,
};
use proptest::prelude::*;
use sha3::{Digest, Keccak256};

fn reference(input: &[u8]) -> [u8; 32] {
    Keccak256::digest(input).into()
}

fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Scalar];
    b.extend(Backend::avx2());
    b.extend(Backend::avx512());
    b
}

#[test]
fn this_machine_runs_the_lanes() {
    // The project's machines have AVX2 (docs/PERFORMANCE.md): the lanes must be what
    // runs, unless forced off, or every figure measures the scalar path.
    if std::env::var("DPOR_KECCAK_LANES").is_err() && std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains(" avx2")) {
        assert_ne!(Backend::best(), Backend::Scalar);
        assert!(Backend::best().lanes() >= 4);
    }
}

#[test]
fn every_length_up_to_two_blocks_in_every_lane() {
    for backend in backends() {
        for len in 0..=200usize {
            let inputs: Vec<Vec<u8>> = (0..4).map(|l| (0..len).map(|i| (i * 7 + l * 31 + len) as u8).collect()).collect();
            let got = keccak256_x4_with(backend, [&inputs[0], &inputs[1], &inputs[2], &inputs[3]]);
            for (l, input) in inputs.iter().enumerate() {
                assert_eq!(got[l], reference(input), "{backend:?}, length {len}, lane {l}");
            }
        }
    }
}

/// Groups of eight inputs of mixed lengths, every length of one block in every lane
/// (the eight-lane path loads each input by masked bytes: its edges at 64 and 128
/// bytes, and the padding byte at each position), against the reference.
#[test]
fn every_one_block_length_in_every_lane_of_eight() {
    for backend in backends() {
        for len in 0..=MAX_LANE_INPUT {
            let inputs: Vec<Vec<u8>> =
                (0..8).map(|l| (0..(len + 41 * l) % (MAX_LANE_INPUT + 1)).map(|i| (i * 5 + l * 29 + len) as u8 | 0x80).collect()).collect();
            let refs: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
            let mut out = vec![[0u8; 32]; 8];
            keccak256_many_with(backend, &refs, &mut out);
            for (l, input) in inputs.iter().enumerate() {
                assert_eq!(out[l], reference(input), "{backend:?}, length {}, lane {l}", input.len());
            }
        }
    }
}

/// `prefix ‖ input` zero-extended to `min_len` bytes, as the reference hashes it.
fn prefixed(prefix: u8, min_len: usize, input: &[u8]) -> Vec<u8> {
    let mut m = vec![prefix];
    m.extend_from_slice(input);
    m.resize(m.len().max(min_len), 0);
    m
}

/// Prefixed messages (a chunk tree's leaves, `0x00 ‖ chunk` zero-padded to 129 bytes,
/// and others): groups of eight of mixed lengths, every input length in every lane,
/// around the edges of the masked loads (64, 128) and of one block (135, 136), on every
/// backend, against the reference over the message built in full.
#[test]
fn prefixed_messages_of_every_length_in_every_lane() {
    for backend in backends() {
        for (prefix, min_len) in [(0x00u8, 129usize), (0x5A, 0), (0xFF, 1), (0x01, 65), (0x02, 135), (0x03, 136), (0x04, 200)] {
            for len in 0..=MAX_LANE_INPUT + 2 {
                let inputs: Vec<Vec<u8>> =
                    (0..11).map(|l| (0..(len + 37 * l) % (MAX_LANE_INPUT + 3)).map(|i| (i * 3 + l * 17 + len) as u8 | 1).collect()).collect();
                let refs: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
                let mut out = vec![[0u8; 32]; refs.len()];
                keccak256_many_prefixed_with(backend, prefix, min_len, &refs, &mut out);
                for (l, input) in inputs.iter().enumerate() {
                    let want = reference(&prefixed(prefix, min_len, input));
                    assert_eq!(out[l], want, "{backend:?}, prefix {prefix:#x}, min_len {min_len}, length {}, lane {l}", input.len());
                }
            }
        }
    }
}

#[test]
fn published_vectors() {
    let empty = hex_32("c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470");
    let abc = hex_32("4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45");
    assert_eq!(keccak256(b""), empty);
    assert_eq!(keccak256(b"abc"), abc);
    assert_eq!(keccak256_x4([b"", b"abc", b"", b"abc"]), [empty, abc, empty, abc]);
}

fn hex_32(s: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

#[test]
fn every_backend_every_batch_size() {
    for backend in backends() {
        for n in 0..=20usize {
            let inputs: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; (i * 13) % 140]).collect();
            let refs: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
            let mut out = vec![[0u8; 32]; n];
            keccak256_many_with(backend, &refs, &mut out);
            for (i, input) in inputs.iter().enumerate() {
                assert_eq!(out[i], reference(input), "{backend:?}, batch of {n}, input {i}");
            }
        }
    }
}

proptest! {
    #[test]
    fn random_prefixed_messages(prefix in any::<u8>(), min_len in 0usize..160, inputs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..=MAX_LANE_INPUT + 20), 0..23)) {
        let refs: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
        let mut out = vec![[0u8; 32]; refs.len()];
        keccak256_many_prefixed(prefix, min_len, &refs, &mut out);
        for (i, input) in inputs.iter().enumerate() {
            prop_assert_eq!(out[i], reference(&prefixed(prefix, min_len, input)));
        }
    }

    #[test]
    fn random_inputs_of_mixed_lengths(inputs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..=MAX_LANE_INPUT + 20), 0..23)) {
        let refs: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
        let mut out = vec![[0u8; 32]; refs.len()];
        keccak256_many(&refs, &mut out);
        for (i, input) in inputs.iter().enumerate() {
            prop_assert_eq!(out[i], reference(input));
        }
    }
}
