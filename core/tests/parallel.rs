//! The rayon-parallel paths (issue 11 #4) give exactly what the sequential code gives:
//! every function is run inside a one-thread pool and a multi-thread pool on the same
//! random input, at sizes above the parallel thresholds, and compared for equality;
//! C-rebuild is also compared with a straightforward stage-by-stage transform (the
//! sequential code before parallelisation, kept here as the reference).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use ark_ff::Field;
use dpor_core::block::BlockFormat;
use dpor_core::checksum::OwnerKeys;
use dpor_core::code::{self, bit_reverse};
use dpor_core::decode::{decode_run, decode_run_correcting};
use dpor_core::extract::extract_report;
use dpor_core::field::{root_of_unity, Fp, MODULUS};
use dpor_core::merkle;
use dpor_core::state::ServerState;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
}

/// Runs `f` on one thread and on `threads` threads; asserts equal results; returns one.
fn same<T: PartialEq + std::fmt::Debug + Send>(threads: usize, f: impl Fn() -> T + Sync) -> T {
    let one = pool(1).install(&f);
    let many = pool(threads).install(&f);
    assert!(one == many, "1 thread and {threads} threads disagree");
    one
}

fn random_elements(rng: &mut ChaCha20Rng, n: usize) -> Vec<Fp> {
    (0..n).map(|_| Fp::from(rng.gen_range(0..MODULUS))).collect()
}

/// The C-rebuild as the sequential code computed it: Y twisted by w^{ψ(r)}, then mixes
/// of sizes 2, 4, …, stage by stage, each a butterfly with twiddles ν^i.
fn reference_c_rebuild(records: &[Fp], log_blocks: u32, width: usize) -> Vec<Fp> {
    let w = root_of_unity(log_blocks + 1).unwrap();
    let mut run = records.to_vec();
    for (r, rec) in records.chunks_exact(width).enumerate() {
        let tw = w.pow([bit_reverse(r as u64, log_blocks)]);
        run.extend(rec.iter().map(|e| *e * tw));
    }
    let n = records.len() / width;
    for half in run.chunks_exact_mut(records.len()) {
        let mut span = 2;
        while span <= n {
            let nu = root_of_unity(span.trailing_zeros()).unwrap();
            for group in half.chunks_exact_mut(span * width) {
                let (a0, a1) = group.split_at_mut(span / 2 * width);
                let mut tw = Fp::from(1u64);
                for (x, y) in a0.chunks_exact_mut(width).zip(a1.chunks_exact_mut(width)) {
                    for (a, b) in x.iter_mut().zip(y.iter_mut()) {
                        let t = *b * tw;
                        *b = *a - t;
                        *a += t;
                    }
                    tw *= nu;
                }
            }
            span *= 2;
        }
    }
    run
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, .. ProptestConfig::default() })]

    #[test]
    fn c_rebuild_and_h_add_do_not_depend_on_threads(seed in any::<u64>(), log_blocks in 9u32..=13, width in prop::sample::select(vec![3usize, 8, 37]), threads in 2usize..=4) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let n = 1usize << log_blocks;
        let records = random_elements(&mut rng, n * width);
        let c = same(threads, || code::c_rebuild(&records, log_blocks, width).unwrap());
        prop_assert_eq!(&c, &reference_c_rebuild(&records, log_blocks, width));
        // HAdd of a large level: the consumed levels 0..ℓ−1 (random runs) and a record.
        let level = log_blocks - 1;
        let t = (1u64 << level) - 1; // t has ℓ trailing ones: fills level ℓ
        let runs: Vec<Vec<Fp>> = (0..level).map(|j| random_elements(&mut rng, (2usize << j) * width)).collect();
        let consumed: Vec<&[Fp]> = runs.iter().map(Vec::as_slice).collect();
        let record = random_elements(&mut rng, width);
        same(threads, || code::h_add(t, log_blocks, &record, &consumed, width).unwrap());
    }

    #[test]
    fn trees_and_checksums_do_not_depend_on_threads(seed in any::<u64>(), blocks in 1usize..=6000, threads in 2usize..=4) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let data: Vec<Vec<u8>> = (0..blocks).map(|_| (0..rng.gen_range(1..600)).map(|_| rng.gen()).collect()).collect();
        let roots = same(threads, || merkle::block_roots(&data));
        let sequential: Vec<_> = data.iter().map(|b| merkle::block_root(b)).collect();
        prop_assert_eq!(&roots, &sequential);
        let n = blocks.next_power_of_two();
        let mut padded = data.clone();
        padded.resize(n, Vec::new());
        let tree = same(threads, || merkle::run_tree(&padded).unwrap());
        let leaves: Vec<_> = padded.iter().enumerate().map(|(p, b)| merkle::run_leaf(p as u64, &merkle::block_root(b))).collect();
        prop_assert_eq!(tree.root(), merkle::MerkleTree::new(leaves).unwrap().root());
        let sealed: Vec<[u8; 32]> = (0..n).map(|i| [i as u8; 32]).collect();
        same(threads, || merkle::u_tree(&padded, &sealed).unwrap().root());
        let keys = OwnerKeys::derive(&[1; 32], 37);
        let elements = random_elements(&mut rng, 37 * blocks);
        let sums = same(threads, || keys.checksums(&elements).unwrap());
        let one_by_one: Vec<Fp> = elements.chunks_exact(37).flat_map(|b| keys.checksum(b).unwrap()).collect();
        prop_assert_eq!(sums, one_by_one);
    }

    #[test]
    fn decoding_does_not_depend_on_threads(seed in any::<u64>(), log_m in 6u32..=10, errors in 0usize..4, threads in 2usize..=4) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let (m, width) = (1usize << log_m, 37);
        let data = random_elements(&mut rng, m * width);
        let run = code::c_rebuild(&data, log_m, width).unwrap();
        // Keep a random 3/4 of the run; corrupt `errors` of the kept blocks.
        let mut order: Vec<u64> = (0..2 * m as u64).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.gen_range(0..=i));
        }
        order.truncate(3 * m / 2);
        let blocks: Vec<Vec<Fp>> = order.iter().map(|&p| run[p as usize * width..(p as usize + 1) * width].to_vec()).collect();
        let clean: Vec<(u64, &[Fp])> = order.iter().zip(&blocks).map(|(p, b)| (*p, b.as_slice())).collect();
        let got = same(threads, || decode_run(2 * m as u64, width, Fp::from(1u64), &clean).unwrap());
        prop_assert_eq!(&got, &data);
        let mut wrong = blocks.clone();
        for b in wrong.iter_mut().take(errors) {
            b[rng.gen_range(0..width)] += Fp::from(1u64);
        }
        let dirty: Vec<(u64, &[Fp])> = order.iter().zip(&wrong).map(|(p, b)| (*p, b.as_slice())).collect();
        let fixed = same(threads, || decode_run_correcting(2 * m as u64, width, Fp::from(1u64), &dirty).unwrap());
        prop_assert_eq!(&fixed.data, &data);
        prop_assert_eq!(fixed.corrected.len(), errors);
        // Past the bound: the same error on any number of threads.
        let few: Vec<(u64, &[Fp])> = clean[..m - 1].to_vec();
        let e1 = pool(1).install(|| decode_run(2 * m as u64, width, Fp::from(1u64), &few));
        let e2 = pool(threads).install(|| decode_run(2 * m as u64, width, Fp::from(1u64), &few));
        prop_assert!(e1.is_err());
        prop_assert_eq!(e1, e2);
    }

    #[test]
    fn extraction_does_not_depend_on_threads(seed in any::<u64>(), writes in 1u64..63, threads in 2usize..=4) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let format = BlockFormat::new(48).unwrap();
        let n = 64usize;
        let blocks: Vec<Vec<u8>> = (0..n).map(|_| (0..48).map(|_| rng.gen()).collect()).collect();
        let mut state = ServerState::new(format, blocks).unwrap();
        for _ in 0..writes {
            let b: Vec<u8> = (0..48).map(|_| rng.gen()).collect();
            state.write(rng.gen_range(0..n as u64), b).unwrap();
        }
        let w = format.width();
        let c: Vec<(u64, &[Fp])> = (0..2 * n as u64).filter(|p| p % 3 != 0).map(|p| (p, &state.c().blocks[p as usize * w..(p as usize + 1) * w])).collect();
        let mut levels = Vec::new();
        for l in 0..6 {
            if let Ok(Some(run)) = state.level(l) {
                let size = run.size(w);
                levels.push((l, (0..size).filter(|p| p % 4 != 1).map(|p| (p, &run.blocks[p as usize * w..(p as usize + 1) * w])).collect::<Vec<_>>()));
            }
        }
        let got = same(threads, || extract_report(&format, 6, state.write_count(), &c, &levels).unwrap());
        prop_assert_eq!(got.blocks.as_slice(), state.u());
    }
}
