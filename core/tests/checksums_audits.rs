//! Checksums (rebuilds on checksums, corruption caught, replays rejected), audit
//! positions and detection rate, Merkle tampering, and the digest's EIP-712 hash.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use alloy_primitives::{address, keccak256, B256, U256};
use alloy_sol_types::SolValue;
use common::*;
use dpor_core::audit::{self, audit_positions, epoch_block_samples, spot_check, RunCommitment, RunResponse, RunTag, SampleFault, SampleResponse};
use dpor_core::block::BlockFormat;
use dpor_core::checksum::{ChecksumError, OwnerKeys, Place, RHO};
use dpor_core::code;
use dpor_core::digest::{Digest, DigestError};
use dpor_core::field::Fp;
use dpor_core::merkle::{self, MerkleError, MerkleTree};
use dpor_core::state::{ServerState, WriteStep};
use rand::Rng;

/// The owner's rebuild on checksums (width ρ) gives exactly the checksums of the
/// coded blocks the server built, for every level and C, through C-rebuilds.
#[test]
fn rebuild_on_checksums_equals_checksums_of_rebuilt_blocks() {
    let mut rng = rng(20);
    let format = BlockFormat::new(40).unwrap();
    let keys = OwnerKeys::derive(&[7u8; 32], format.width());
    let log_n = 4;
    let n = 1usize << log_n;
    let blocks: Vec<Vec<u8>> = (0..n).map(|_| random_block(&mut rng, 40)).collect();
    let mut state = ServerState::new(format, blocks.clone()).unwrap();
    // The owner's mirror: checksums only.
    let mut u_sigma: Vec<Vec<Fp>> =
        blocks.iter().enumerate().map(|(i, b)| keys.checksum(&format.record(i as u64, b).unwrap()).unwrap().to_vec()).collect();
    let mut c_sigma = code::c_rebuild(&u_sigma.concat(), log_n, RHO).unwrap();
    assert_eq!(c_sigma, keys.checksums(&state.c().blocks).unwrap());
    let mut levels: Vec<Option<Vec<Fp>>> = vec![None; log_n as usize];
    for _ in 0..(2 * n + 5) {
        let t = state.write_count();
        let i = rng.gen_range(0..n as u64);
        let b = random_block(&mut rng, 40);
        let sigma = keys.checksum(&format.record(i, &b).unwrap()).unwrap().to_vec();
        u_sigma[i as usize] = sigma.clone();
        match state.write(i, b).unwrap() {
            WriteStep::Level(l) => {
                let consumed: Vec<&[Fp]> = levels[..l as usize].iter().map(|x| x.as_deref().unwrap()).collect();
                let run = code::h_add(t, log_n, &sigma, &consumed, RHO).unwrap();
                for x in &mut levels[..l as usize] {
                    *x = None;
                }
                let server = state.level(l).unwrap().unwrap();
                assert_eq!(run, keys.checksums(&server.blocks).unwrap(), "level {l} at t={t}");
                levels[l as usize] = Some(run);
            }
            WriteStep::CRebuild => {
                c_sigma = code::c_rebuild(&u_sigma.concat(), log_n, RHO).unwrap();
                levels.iter_mut().for_each(|x| *x = None);
                assert_eq!(c_sigma, keys.checksums(&state.c().blocks).unwrap());
            }
        }
    }
}

fn run_bytes(format: &BlockFormat, run: &[Fp]) -> Vec<Vec<u8>> {
    run.chunks_exact(format.width()).map(|b| format.coded_to_bytes(b).unwrap()).collect()
}

fn sample(tree: &MerkleTree, bytes: &[Vec<u8>], p: u64) -> SampleResponse {
    SampleResponse { position: p, block: bytes[p as usize].clone(), path: tree.path(p).unwrap() }
}

/// A single flipped byte in any coded block of a run is caught: by the Merkle path
/// if the server kept its honest tree, by the checksum if it re-committed its tree
/// over the corrupted run, or by the encoding if the bytes stop being an element.
#[test]
fn any_flipped_byte_is_caught_by_path_or_checksum() {
    let mut rng = rng(21);
    let format = BlockFormat::new(20).unwrap();
    let keys = OwnerKeys::derive(&[9u8; 32], format.width());
    let records = random_elements(&mut rng, 8 * format.width()).iter().map(|x| Fp::from(crate_small(*x))).collect::<Vec<_>>();
    let run = code::c_rebuild(&records, 3, format.width()).unwrap();
    let expected = keys.checksums(&run).unwrap();
    let bytes = run_bytes(&format, &run);
    let tree = merkle::run_tree(&bytes).unwrap();
    let size = 16u64;
    let all: Vec<u64> = (0..size).collect();
    let honest: Vec<SampleResponse> = all.iter().map(|&p| sample(&tree, &bytes, p)).collect();
    assert!(spot_check(&keys, &format, &RunCommitment { tag: RunTag::C, root: tree.root(), size }, &expected, &all, &honest).is_empty());
    for p in 0..size as usize {
        for byte in 0..format.coded_block_bytes() {
            let mut bad = bytes.clone();
            bad[p][byte] ^= 1 << (byte % 8);
            // Server kept the honest tree: the path fails.
            let s = SampleResponse { position: p as u64, block: bad[p].clone(), path: tree.path(p as u64).unwrap() };
            let f = spot_check(&keys, &format, &RunCommitment { tag: RunTag::C, root: tree.root(), size }, &expected, &[p as u64], &[s]);
            assert!(matches!(f[0].fault, SampleFault::Path(MerkleError::Mismatch)));
            // Server re-committed over the corrupted run: the checksum (or encoding) fails.
            let bad_tree = merkle::run_tree(&bad).unwrap();
            let s = sample(&bad_tree, &bad, p as u64);
            let f = spot_check(&keys, &format, &RunCommitment { tag: RunTag::C, root: bad_tree.root(), size }, &expected, &[p as u64], &[s]);
            assert_eq!(f.len(), 1, "flip at block {p} byte {byte} not caught");
            assert!(matches!(f[0].fault, SampleFault::Checksum | SampleFault::Encoding));
        }
    }
}

fn crate_small(x: Fp) -> u64 {
    dpor_core::field::to_u64(x) >> 8
}

/// σ̃ opens only at the place and time it was sealed for, and only with the owner's keys.
#[test]
fn sealed_checksum_replayed_elsewhere_fails_to_open() {
    let keys = OwnerKeys::derive(&[1u8; 32], 5);
    let other = OwnerKeys::derive(&[2u8; 32], 5);
    let sigma = [Fp::from(11u64), Fp::from(22u64)];
    let place = Place::Run { tag: RunTag::level(3), built_at: 40, position: 5 };
    let sealed = keys.seal(place, &sigma);
    assert_eq!(keys.open(place, &sealed).unwrap(), sigma);
    for wrong in [
        Place::Run { tag: RunTag::level(3), built_at: 41, position: 5 },
        Place::Run { tag: RunTag::level(2), built_at: 40, position: 5 },
        Place::Run { tag: RunTag::level(3), built_at: 40, position: 6 },
        Place::Run { tag: RunTag::C, built_at: 40, position: 5 },
        Place::U { index: 5 },
    ] {
        assert_eq!(keys.open(wrong, &sealed), Err(ChecksumError::Open(wrong)));
    }
    assert!(other.open(place, &sealed).is_err());
    for i in 0..32 {
        let mut t = sealed;
        t[i] ^= 0x80;
        assert!(keys.open(place, &t).is_err(), "tampered byte {i}");
    }
    let u = keys.seal(Place::U { index: 3 }, &sigma);
    assert!(keys.open(Place::U { index: 4 }, &u).is_err());
}

/// The σ̃_U of an all-zero block (`ZERO_BLOCK_U`, all zero bytes): it stands for the
/// zero block at its index, for `open_u` (σ of the zero record, independent reference:
/// the checksum computed directly) and for the read check (only zero bytes pass).
#[test]
fn unwritten_u_stands_for_the_zero_block_only() {
    use dpor_core::checksum::ZERO_BLOCK_U;
    let format = BlockFormat::new(40).unwrap();
    let keys = OwnerKeys::derive(&[3u8; 32], format.width());
    let zero = vec![0u8; 40];
    for index in [0u64, 7, 1 << 20] {
        let want = keys.checksum(&format.record(index, &zero).unwrap()).unwrap();
        assert_eq!(keys.open_u(index, &ZERO_BLOCK_U, || format.record(index, &zero).unwrap()).unwrap(), want);
    }
    // open() itself never accepts it: only U leaves checked against rootU do.
    assert!(keys.open(Place::U { index: 7 }, &ZERO_BLOCK_U).is_err());
    // seal_u gives it for a zero block, a real seal otherwise.
    let s0 = keys.checksum(&format.record(7, &zero).unwrap()).unwrap();
    assert_eq!(keys.seal_u(7, &zero, &s0), ZERO_BLOCK_U);
    let mut one = zero.clone();
    one[39] = 1;
    let real = keys.seal(Place::U { index: 9 }, &keys.checksum(&format.record(9, &one).unwrap()).unwrap());
    assert_eq!(keys.first_bad_u_block(&format, 8, &[zero.clone(), one.clone()], &[ZERO_BLOCK_U, real]), None);
    assert_eq!(keys.first_bad_u_block(&format, 8, &[zero.clone(), one.clone()], &[ZERO_BLOCK_U, ZERO_BLOCK_U]), Some(9));
    assert_eq!(keys.first_bad_u_block(&format, 8, &[one.clone(), zero], &[ZERO_BLOCK_U, real]), Some(8));
}

/// Positions: deterministic, in range, all of a small run, and a different seed or
/// digest gives different positions.
#[test]
fn audit_positions_are_deterministic_and_in_range() {
    let seed = B256::repeat_byte(1);
    let d = B256::repeat_byte(2);
    let a = audit_positions(seed, d, RunTag::C, 1 << 20, 128);
    assert_eq!(a, audit_positions(seed, d, RunTag::C, 1 << 20, 128));
    assert_eq!(a.len(), 128);
    assert!(a.iter().all(|&p| p < 1 << 20));
    assert_ne!(a, audit_positions(B256::repeat_byte(3), d, RunTag::C, 1 << 20, 128));
    assert_ne!(a, audit_positions(seed, B256::repeat_byte(4), RunTag::C, 1 << 20, 128));
    assert_ne!(a, audit_positions(seed, d, RunTag::level(19), 1 << 20, 128));
    assert_eq!(audit_positions(seed, d, RunTag::level(2), 8, 128), (0..8).collect::<Vec<_>>());
    // Independent recomputation of position 0 with alloy's ABI encoder.
    let h = keccak256((keccak256(b"dpor.audit.v1"), seed, d, U256::from(0u64), U256::from(0u64)).abi_encode());
    assert_eq!(a[0], (U256::from_be_bytes(h.0) % U256::from(1u64 << 20)).to::<u64>());
}

/// Epoch samples (ENCODING §8 v2) stay in range, visit min(K, R) distinct runs in turn,
/// and sample every run equally often whatever its size: at N = 2^10 the 2-block level 0
/// is drawn as often as the 2048-block C (under the v1 rule it was drawn 0.1% of the time).
#[test]
fn epoch_samples_visit_every_run_equally() {
    let n = 1u64 << 10;
    let t = 0b1011u64; // levels 0, 1, 3: sizes 2, 4, 16; C 2048
    let order = [RunTag::C, RunTag::level(0), RunTag::level(1), RunTag::level(3)];
    let mut counts = std::collections::HashMap::new();
    let trials = 4000u64;
    for s in 0..trials {
        let samples = epoch_block_samples(B256::from(U256::from(s)), B256::ZERO, n, t, 2);
        assert_ne!(samples[0].tag, samples[1].tag, "K = 2 ≤ R = 4 samples hit distinct runs");
        let i0 = order.iter().position(|&r| r == samples[0].tag).unwrap();
        assert_eq!(samples[1].tag, order[(i0 + 1) % 4], "runs are visited in run order");
        for e in samples {
            let size = match e.tag.as_level() { None => 2 * n, Some(l) => 2 << l };
            assert!(e.position < size);
            *counts.entry(e.tag).or_insert(0u64) += 1;
        }
    }
    for tag in order {
        let share = counts[&tag] as f64 / (2 * trials) as f64;
        assert!((share - 0.25).abs() < 0.03, "{tag} share {share}");
    }
    assert!(!counts.contains_key(&RunTag::level(2)));
}

/// Detection, measured: a provider that dropped a fraction f of a run is caught by λ
/// samples with probability ≥ 1 − (1 − f)^λ (Monte Carlo with a fixed seed; the
/// bound less three standard errors).
#[test]
fn audit_detection_rate_meets_the_bound() {
    let mut rng = rng(22);
    let size = 1u64 << 12;
    let trials = 3000;
    for (f, lambda) in [(0.01, 128u32), (0.05, 16), (0.1, 8), (0.25, 4)] {
        let dropped: std::collections::HashSet<u64> =
            (0..size).filter(|_| rng.gen_bool(f)).collect();
        let f_real = dropped.len() as f64 / size as f64;
        let caught = (0..trials)
            .filter(|_| {
                let seed = B256::from(rng.gen::<[u8; 32]>());
                audit_positions(seed, B256::ZERO, RunTag::C, size, lambda).iter().any(|p| dropped.contains(p))
            })
            .count();
        let rate = caught as f64 / trials as f64;
        let bound = 1.0 - (1.0 - f_real).powi(lambda as i32);
        let se = (bound * (1.0 - bound) / trials as f64).sqrt();
        assert!(rate >= bound - 3.0 * se, "f={f} λ={lambda}: caught {rate}, bound {bound}");
    }
}

/// A public audit against a digest: passes for an honest run, names the sample a
/// dropped, stale or foreign block fails on.
#[test]
fn verify_audit_names_failing_samples() {
    let mut rng = rng(23);
    let format = BlockFormat::new(21).unwrap();
    let records = random_elements(&mut rng, 64 * format.width()).iter().map(|x| Fp::from(crate_small(*x))).collect::<Vec<_>>();
    let run = code::c_rebuild(&records, 6, format.width()).unwrap();
    let bytes = run_bytes(&format, &run);
    let tree = merkle::run_tree(&bytes).unwrap();
    let digest = Digest {
        dealId: U256::from(1u64), version: 1, numBlocks: 64, writeCount: 0, rebuildCount: 0,
        rootU: B256::ZERO, rootC: tree.root(), levelRoots: vec![],
    };
    let dh = digest.digest_hash(31337, address!("0x5FbDB2315678afecb367f032d93F642f64180aa3"));
    let seed = B256::repeat_byte(5);
    let plan = audit::audit_plan(&digest, dh, seed, 16);
    let answer = |bytes: &[Vec<u8>], tree: &MerkleTree| -> Vec<RunResponse> {
        plan.iter().map(|(tag, ps)| RunResponse { tag: *tag, samples: ps.iter().map(|&p| sample(tree, bytes, p)).collect() }).collect()
    };
    let ok = audit::verify_audit(&digest, dh, seed, 16, &format, &answer(&bytes, &tree));
    assert!(ok.passed());
    assert_eq!(ok.checked, 16);
    // A provider that lost the first sampled block serves zeros in its place.
    let victim = plan[0].1[0];
    let mut lost = bytes.clone();
    lost[victim as usize] = vec![0u8; format.coded_block_bytes()];
    let out = audit::verify_audit(&digest, dh, seed, 16, &format, &answer(&lost, &tree));
    assert!(!out.passed());
    assert_eq!(out.failures[0].position, victim);
    // Silence fails every sample.
    let out = audit::verify_audit(&digest, dh, seed, 16, &format, &[]);
    assert_eq!(out.failures.len(), 16);
    assert!(matches!(out.failures[0].fault, SampleFault::Missing));
}

/// Every tampered leaf, path node, index or root is rejected.
#[test]
fn merkle_rejects_every_tampering() {
    let leaves: Vec<B256> = (0..16u8).map(|i| keccak256([i])).collect();
    let tree = MerkleTree::new(leaves.clone()).unwrap();
    let root = tree.root();
    for i in 0..16u64 {
        let path = tree.path(i).unwrap();
        merkle::verify_path(&root, 4, i, leaves[i as usize], &path).unwrap();
        for bit in [0usize, 77, 255] {
            let mut leaf = leaves[i as usize];
            leaf.0[bit / 8] ^= 1 << (bit % 8);
            assert!(merkle::verify_path(&root, 4, i, leaf, &path).is_err());
            let mut r = root;
            r.0[bit / 8] ^= 1 << (bit % 8);
            assert!(merkle::verify_path(&r, 4, i, leaves[i as usize], &path).is_err());
            for h in 0..4 {
                let mut p = path.clone();
                p[h].0[bit / 8] ^= 1 << (bit % 8);
                assert!(merkle::verify_path(&root, 4, i, leaves[i as usize], &p).is_err());
            }
        }
        for j in 0..16u64 {
            if j != i {
                assert!(merkle::verify_path(&root, 4, j, leaves[i as usize], &path).is_err());
            }
        }
        assert_eq!(merkle::verify_path(&root, 4, i + 16, leaves[i as usize], &path).unwrap_err(), MerkleError::Index { index: i + 16, leaves: 16 });
        assert!(matches!(merkle::verify_path(&root, 4, i, leaves[i as usize], &path[..3]), Err(MerkleError::PathLength { .. })));
    }
    // Chunk proofs.
    let block: Vec<u8> = (0..4696u32).map(|i| i as u8).collect();
    let br = merkle::block_root(&block);
    for c in 0..37u64 {
        let (chunk, path) = merkle::chunk_proof(&block, c).unwrap();
        merkle::verify_chunk(&br, 4696, c, &chunk, &path).unwrap();
        let mut bad = chunk;
        bad[(c as usize * 7) % 128] ^= 4;
        assert!(merkle::verify_chunk(&br, 4696, c, &bad, &path).is_err());
    }
    assert!(merkle::chunk_proof(&block, 37).is_err());
    // No proof reaches a padding leaf.
    let path = merkle::chunk_tree(&block).path(40).unwrap();
    assert!(merkle::verify_chunk(&br, 4696, 40, &[0u8; 128], &path).is_err());
}

/// hashStruct recomputed by hand from EIP-712's definition (type hash and ABI words).
#[test]
fn digest_struct_hash_matches_eip712_by_hand() {
    let d = Digest {
        dealId: U256::from(42u64), version: 3, numBlocks: 1 << 20, writeCount: 0b101, rebuildCount: 2,
        rootU: B256::repeat_byte(0xaa), rootC: B256::repeat_byte(0xbb),
        levelRoots: vec![B256::repeat_byte(1), B256::repeat_byte(2)],
    };
    d.validate().unwrap();
    let type_hash = keccak256(
        "Digest(uint256 dealId,uint64 version,uint64 numBlocks,uint64 writeCount,uint64 rebuildCount,bytes32 rootU,bytes32 rootC,bytes32[] levelRoots)",
    );
    let roots_hash = keccak256([[1u8; 32], [2u8; 32]].concat());
    let enc = (type_hash, U256::from(42u64), U256::from(3u64), U256::from(1u64 << 20), U256::from(5u64), U256::from(2u64),
        B256::repeat_byte(0xaa), B256::repeat_byte(0xbb), roots_hash).abi_encode();
    assert_eq!(d.struct_hash(), keccak256(enc));
    let contract = address!("0x5FbDB2315678afecb367f032d93F642f64180aa3");
    let dom = keccak256((
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
        keccak256("dpor"), keccak256("1"), U256::from(31337u64), contract,
    ).abi_encode());
    let mut pre = vec![0x19, 0x01];
    pre.extend_from_slice(dom.as_slice());
    pre.extend_from_slice(d.struct_hash().as_slice());
    assert_eq!(d.digest_hash(31337, contract), keccak256(pre));
    assert_ne!(d.digest_hash(1, contract), d.digest_hash(31337, contract));
    let mut bad = d.clone();
    bad.levelRoots.pop();
    assert_eq!(bad.validate(), Err(DigestError::LevelRoots { got: 1, expected: 2 }));
    bad.numBlocks = 12;
    assert_eq!(bad.validate(), Err(DigestError::NumBlocks(12)));
    let runs = d.runs();
    assert_eq!(runs.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(), vec![(RunTag::C, 2 << 20), (RunTag::level(0), 2), (RunTag::level(2), 8)]);
}

/// The read check of U's blocks by checksum (`first_bad_u_block`): the owner's blocks
/// with their σ̃_U pass; a changed byte, a block moved to another index, a σ̃ from
/// another index or a damaged σ̃ each fail at the right index; a length mismatch fails.
#[test]
fn u_blocks_are_checked_by_checksum_and_each_kind_of_tampering_is_caught() {
    let mut rng = rng(21);
    let format = BlockFormat::new(64).unwrap();
    let keys = OwnerKeys::derive(&[9u8; 32], format.width());
    let start = 100u64;
    let blocks: Vec<Vec<u8>> = (0..40).map(|_| random_block(&mut rng, 64)).collect();
    let sealed: Vec<[u8; 32]> = blocks
        .iter()
        .enumerate()
        .map(|(j, b)| {
            let i = start + j as u64;
            keys.seal(Place::U { index: i }, &keys.checksum(&format.record(i, b).unwrap()).unwrap())
        })
        .collect();
    assert_eq!(keys.first_bad_u_block(&format, start, &blocks, &sealed), None);

    let mut b = blocks.clone();
    b[17][5] ^= 1;
    assert_eq!(keys.first_bad_u_block(&format, start, &b, &sealed), Some(start + 17), "one flipped bit");
    let mut b = blocks.clone();
    b.swap(3, 30);
    assert_eq!(keys.first_bad_u_block(&format, start, &b, &sealed), Some(start + 3), "blocks swapped");
    let mut s = sealed.clone();
    s[8] = s[9];
    assert_eq!(keys.first_bad_u_block(&format, start, &blocks, &s), Some(start + 8), "σ̃ of another index");
    let mut s = sealed.clone();
    s[33][0] ^= 0x80;
    assert_eq!(keys.first_bad_u_block(&format, start, &blocks, &s), Some(start + 33), "damaged σ̃");
    assert_eq!(keys.first_bad_u_block(&format, start + 1, &blocks, &sealed), Some(start + 1), "shifted indices");
    assert_eq!(keys.first_bad_u_block(&format, start, &blocks[..39], &sealed), Some(start + 39), "one block missing");
    let other = OwnerKeys::derive(&[8u8; 32], format.width());
    assert_eq!(other.first_bad_u_block(&format, start, &blocks, &sealed), Some(start), "another owner's keys");
}
