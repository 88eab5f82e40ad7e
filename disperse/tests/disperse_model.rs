//! Dispersal against a reference model: the file is a plain byte array; shards are
//! split, some lost, written to block by block with parity deltas, and decoded.
//! The reference for the layout is computed here independently (file block b at shard
//! b mod k, index b / k); the reference for the code is linearity + decoding from
//! every k-subset, which only a correct MDS code passes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dpor_disperse::coder::{xor_into, CodeError, StripeCoder};
use dpor_disperse::{Geometry, ShardIndex};
use proptest::prelude::*;
use proptest::sample::subsequence;

/// Small blocks so that many stripes fit in a case (β = 4096 is covered separately):
/// multiples of 64 (coded in runs of stripes) and others (coded stripe by stripe).
const BETAS: [u32; 4] = [2, 64, 96, 128];

/// (k, n, β, file) with 1 ≤ k < n ≤ 16 and 1..=20 stripes' worth of bytes.
fn shape_and_file() -> impl Strategy<Value = (u16, u16, u32, Vec<u8>)> {
    (2u16..=16, proptest::sample::select(&BETAS[..]))
        .prop_flat_map(|(n, beta)| (1u16..n, Just(n), Just(beta)))
        .prop_flat_map(|(k, n, beta)| {
            let max = (k as usize) * (beta as usize) * 20;
            (Just(k), Just(n), Just(beta), proptest::collection::vec(any::<u8>(), 1..=max))
        })
}

/// The reference layout: the β-byte block of data shard `j` at `stripe`.
fn model_block(file: &[u8], beta: usize, k: usize, j: usize, stripe: usize) -> Vec<u8> {
    let start = (stripe * k + j) * beta;
    let mut b = vec![0u8; beta];
    if start < file.len() {
        let end = (start + beta).min(file.len());
        b[..end - start].copy_from_slice(&file[start..end]);
    }
    b
}

fn lose(shards: &[Vec<u8>], lost: &[usize]) -> Vec<Option<Vec<u8>>> {
    shards.iter().enumerate().map(|(i, s)| (!lost.contains(&i)).then(|| s.clone())).collect()
}

fn refs(shards: &[Option<Vec<u8>>]) -> Vec<Option<&[u8]>> {
    shards.iter().map(|s| s.as_deref()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    /// Data shards are the reference layout, and any set of up to n − k lost shards
    /// decodes to the file byte for byte.
    #[test]
    fn split_then_decode_after_up_to_n_minus_k_losses(
        (k, n, beta, file) in shape_and_file(),
        seed in any::<u64>(),
    ) {
        let g = Geometry::new(k, n, beta).unwrap();
        let b = beta as usize;
        let mut coder = StripeCoder::new(g).unwrap();
        let shards = coder.split_file(&file).unwrap();
        let stripes = g.stripes(file.len() as u64).unwrap() as usize;
        prop_assert_eq!(shards.len(), n as usize);
        for (j, shard) in shards.iter().enumerate() {
            prop_assert_eq!(shard.len(), stripes * b);
            if j < k as usize {
                for s in 0..stripes {
                    prop_assert_eq!(&shard[s * b..(s + 1) * b], &model_block(&file, b, k as usize, j, s)[..]);
                }
            }
        }
        // Parity: each stripe's parity equals encoding that stripe alone.
        for s in 0..stripes {
            let data: Vec<&[u8]> = shards[..k as usize].iter().map(|d| &d[s * b..(s + 1) * b]).collect();
            let parity = coder.encode(&data).unwrap();
            for (i, p) in parity.iter().enumerate() {
                prop_assert_eq!(&shards[k as usize + i][s * b..(s + 1) * b], &p[..]);
            }
        }
        // A random set of lost shards of random size 0..=n−k.
        let mut rng = seed;
        let mut order: Vec<usize> = (0..n as usize).collect();
        for i in (1..order.len()).rev() {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            order.swap(i, (rng >> 33) as usize % (i + 1));
        }
        let lost_count = (rng >> 17) as usize % (n - k + 1) as usize;
        let lost = &order[..lost_count];
        let got = coder.join_file(file.len() as u64, &refs(&lose(&shards, lost))).unwrap();
        prop_assert_eq!(got, file);
    }

    /// Losing n − k + 1 shards is a clear error, never a wrong file.
    #[test]
    fn one_loss_too_many_is_an_error(
        (k, n, beta, file) in shape_and_file(),
        lost in (2u16..=16).prop_flat_map(|n| subsequence((0..n as usize).collect::<Vec<_>>(), 0..=n as usize)),
    ) {
        let g = Geometry::new(k, n, beta).unwrap();
        let mut coder = StripeCoder::new(g).unwrap();
        let shards = coder.split_file(&file).unwrap();
        // Lose exactly n − k + 1 shards: the ones drawn that exist, topped up in order.
        let mut lost: Vec<usize> = lost.into_iter().filter(|&i| i < n as usize).collect();
        let mut i = 0;
        while lost.len() < (n - k + 1) as usize {
            if !lost.contains(&i) { lost.push(i); }
            i += 1;
        }
        lost.truncate((n - k + 1) as usize);
        let err = coder.join_file(file.len() as u64, &refs(&lose(&shards, &lost))).unwrap_err();
        match err {
            CodeError::TooFewShards { have, need, total, lost_max } => {
                prop_assert_eq!(have, k as usize - 1);
                prop_assert_eq!(need, k as usize);
                prop_assert_eq!(total, n as usize);
                prop_assert_eq!(lost_max, (n - k) as usize);
            }
            other => prop_assert!(false, "unexpected error {other}"),
        }
    }

    /// Writes of whole blocks, each applied to the data shard and (by parity deltas) to
    /// every parity shard, then decoding after up to n − k losses, give the model array.
    /// Every parity update equals re-encoding the stripe.
    #[test]
    fn writes_then_decode_equal_the_model(
        (k, n, beta, file) in shape_and_file(),
        writes in proptest::collection::vec((any::<u64>(), proptest::collection::vec(any::<u8>(), 128)), 1..12),
        lost_seed in any::<u64>(),
    ) {
        let g = Geometry::new(k, n, beta).unwrap();
        let beta = beta as usize;
        let mut coder = StripeCoder::new(g).unwrap();
        let mut shards = coder.split_file(&file).unwrap();
        let file_blocks = g.file_blocks(file.len() as u64).unwrap();
        let mut model = file.clone();
        for (pick, mut new) in writes {
            new.truncate(beta);
            let b = pick % file_blocks;
            // The model: the block's bytes within the file (a write past L is cut off, as
            // the file keeps its length).
            let start = b as usize * beta;
            let end = (start + beta).min(model.len());
            model[start..end].copy_from_slice(&new[..end - start]);
            let mut new_block = new.clone();
            new_block[end - start..].fill(0);
            // The shards: data block, then parity by deltas.
            let (shard, stripe) = g.locate(b);
            let at = stripe as usize * beta..(stripe as usize + 1) * beta;
            let old = shards[shard.get()][at.clone()].to_vec();
            let old_parity: Vec<Vec<u8>> = (k..n).map(|p| shards[p as usize][at.clone()].to_vec()).collect();
            let new_parity = coder.updated_parity(shard, &old, &new_block, &old_parity).unwrap();
            shards[shard.get()][at.clone()].copy_from_slice(&new_block);
            for (i, p) in new_parity.iter().enumerate() {
                shards[k as usize + i][at.clone()].copy_from_slice(p);
            }
            // Equal to re-encoding the stripe from its data blocks.
            let data: Vec<Vec<u8>> = (0..k).map(|j| shards[j as usize][at.clone()].to_vec()).collect();
            prop_assert_eq!(coder.encode(&data).unwrap(), new_parity);
        }
        let lost: Vec<usize> = (0..n as usize).filter(|i| (lost_seed >> (i % 64)) & 1 == 1).take((n - k) as usize).collect();
        let got = coder.join_file(file.len() as u64, &refs(&lose(&shards, &lost))).unwrap();
        prop_assert_eq!(got, model);
    }

    /// Linearity over GF(2): encode(a) ⊕ encode(b) = encode(a ⊕ b), the property the
    /// parity delta rests on.
    #[test]
    fn encoding_is_linear(
        (k, n) in (2u16..=16).prop_flat_map(|n| (1u16..n, Just(n))),
        beta in proptest::sample::select(&BETAS[..]),
        seed in any::<u64>(),
    ) {
        use rand::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let g = Geometry::new(k, n, beta).unwrap();
        let mut coder = StripeCoder::new(g).unwrap();
        let mut block = || { let mut b = vec![0u8; beta as usize]; rng.fill_bytes(&mut b); b };
        let a: Vec<Vec<u8>> = (0..k).map(|_| block()).collect();
        let b: Vec<Vec<u8>> = (0..k).map(|_| block()).collect();
        let ab: Vec<Vec<u8>> = a.iter().zip(&b).map(|(x, y)| x.iter().zip(y).map(|(p, q)| p ^ q).collect()).collect();
        let mut pa = coder.encode(&a).unwrap();
        let pb = coder.encode(&b).unwrap();
        for (x, y) in pa.iter_mut().zip(&pb) { xor_into(x, y); }
        prop_assert_eq!(pa, coder.encode(&ab).unwrap());
    }
}

/// Every k-subset of a stripe of β = 4096 decodes it (MDS), for 4-of-6, 3-of-7, 1-of-2
/// and 10-of-16. (The coder checks no integrity: callers verify every block against
/// its deal's roots before decoding.)
#[test]
fn every_k_subset_decodes_at_4096() {
    use rand::{RngCore, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(12);
    for (k, n) in [(4u16, 6u16), (3, 7), (1, 2), (10, 16)] {
        let g = Geometry::new(k, n, 4096).unwrap();
        let mut coder = StripeCoder::new(g).unwrap();
        let data: Vec<Vec<u8>> = (0..k)
            .map(|_| {
                let mut b = vec![0u8; 4096];
                rng.fill_bytes(&mut b);
                b
            })
            .collect();
        let parity = coder.encode(&data).unwrap();
        let all: Vec<&[u8]> = data.iter().chain(parity.iter()).map(|b| b.as_slice()).collect();
        for mask in 0u32..(1 << n) {
            if mask.count_ones() != k as u32 {
                continue;
            }
            let given: Vec<(ShardIndex, &[u8])> =
                (0..n).filter(|i| mask >> i & 1 == 1).map(|i| (ShardIndex(i), all[i as usize])).collect();
            assert_eq!(coder.decode(&given).unwrap(), data, "{k}-of-{n} mask {mask:b}");
        }
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let g = Geometry::new(2, 4, 64).unwrap();
    let mut coder = StripeCoder::new(g).unwrap();
    let b = vec![1u8; 64];
    let short = [1u8; 63];
    assert!(matches!(coder.encode(&[&b[..]]), Err(CodeError::DataCount { got: 1, expected: 2 })));
    assert!(matches!(coder.encode(&[&b[..], &short[..]]), Err(CodeError::BlockLength { got: 63, .. })));
    assert!(matches!(coder.encode(&[&short[..], &short[..]]), Err(CodeError::RunLength { got: 63, .. })));
    assert!(matches!(
        coder.decode(&[(ShardIndex(0), &b[..]), (ShardIndex(0), &b[..])]),
        Err(CodeError::DuplicateShard(ShardIndex(0)))
    ));
    assert!(matches!(coder.decode(&[(ShardIndex(4), &b[..])]), Err(CodeError::Geometry(_))));
    assert!(matches!(coder.parity_delta(ShardIndex(2), &b, &b), Err(CodeError::NotData(ShardIndex(2)))));
    assert!(matches!(coder.split_file(&[]), Err(CodeError::Geometry(_))));
    let shards = coder.split_file(&[5u8; 200]).unwrap();
    assert!(matches!(
        coder.join_file(200, &[Some(&shards[0][..64]), Some(&shards[1]), None, None]),
        Err(CodeError::ShardLength { shard: ShardIndex(0), .. })
    ));
    // The coder is still usable after every error above.
    assert_eq!(coder.join_file(200, &[None, Some(&shards[1]), None, Some(&shards[3])]).unwrap(), vec![5u8; 200]);
}

/// A run of r stripes (r·β bytes per shard, β a multiple of 64) encodes and decodes
/// exactly as its r stripes one by one: what `split_file` and `join_file` rely on.
#[test]
fn a_run_codes_as_its_stripes() {
    use rand::{RngCore, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for (k, n, beta, r) in [(4u16, 6u16, 4096u32, 5usize), (3, 7, 64, 9), (10, 16, 192, 3)] {
        let g = Geometry::new(k, n, beta).unwrap();
        let b = beta as usize;
        let mut coder = StripeCoder::new(g).unwrap();
        assert!(coder.batches());
        let runs: Vec<Vec<u8>> = (0..k)
            .map(|_| {
                let mut v = vec![0u8; r * b];
                rng.fill_bytes(&mut v);
                v
            })
            .collect();
        let parity = coder.encode(&runs).unwrap();
        for s in 0..r {
            let data: Vec<&[u8]> = runs.iter().map(|d| &d[s * b..(s + 1) * b]).collect();
            for (i, p) in coder.encode(&data).unwrap().iter().enumerate() {
                assert_eq!(&parity[i][s * b..(s + 1) * b], &p[..], "{k}-of-{n} β {beta} stripe {s} parity {i}");
            }
        }
        // Decode the run from the last k shards.
        let all: Vec<&[u8]> = runs.iter().chain(parity.iter()).map(|v| v.as_slice()).collect();
        let given: Vec<(ShardIndex, &[u8])> = (n - k..n).map(|i| (ShardIndex(i), all[i as usize])).collect();
        assert_eq!(coder.decode(&given).unwrap(), runs);
    }
    // Not a multiple of 64: one stripe at a time only.
    let mut coder = StripeCoder::new(Geometry::new(2, 3, 96).unwrap()).unwrap();
    assert!(!coder.batches());
    let two = [0u8; 192];
    assert!(matches!(coder.encode(&[&two[..], &two[..]]), Err(CodeError::RunLength { got: 192, beta: 96 })));
}
