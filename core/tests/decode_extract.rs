//! Decoding from any half, the error past half, and extraction against a naive model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use dpor_core::block::{BlockFormat, FileLayout};
use dpor_core::code::{self, level_start, y_scale};
use dpor_core::decode::{decode_run, DecodeError};
use dpor_core::extract::{extract, ExtractError, Present};
use dpor_core::field::Fp;
use dpor_core::state::ServerState;
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::Rng;

/// Coded blocks of a run kept at the given positions.
fn keep<'a>(run: &'a [Fp], width: usize, positions: &[u64]) -> Present<'a> {
    positions.iter().map(|&p| (p, &run[p as usize * width..(p as usize + 1) * width])).collect()
}

/// Level sizes 2^0..2^12 data blocks: decode from a random half of the coded blocks,
/// then fail with one block fewer.
#[test]
fn decode_from_random_half_up_to_2_pow_12() {
    let mut rng = rng(10);
    let width = 2;
    for log_m in 0..=12u32 {
        let m = 1usize << log_m;
        let log_n = log_m.max(1) + 1;
        let t0 = 0;
        let data = random_elements(&mut rng, m * width);
        let scale = y_scale(t0, log_n).unwrap();
        let g_free = hadd_window(&data, 0, log_m, log_m.max(1) + 1, width);
        let mut positions: Vec<u64> = (0..2 * m as u64).collect();
        positions.shuffle(&mut rng);
        let half = &positions[..m];
        let got = decode_run(2 * m as u64, width, scale, &keep(&g_free, width, half)).unwrap();
        assert_eq!(got, data, "level of 2^{log_m} blocks from a random half");
        if m > 1 {
            let err = decode_run(2 * m as u64, width, scale, &keep(&g_free, width, &half[..m - 1])).unwrap_err();
            assert_eq!(err, DecodeError::TooFewBlocks { have: m - 1, need: m });
        }
    }
}

/// Extra blocks beyond half are checked: one corrupted block among more than half
/// gives an error, never garbage.
#[test]
fn decode_detects_corruption_with_redundancy() {
    let mut rng = rng(11);
    let width = 3;
    let log_m = 6;
    let m = 1usize << log_m;
    let data = random_elements(&mut rng, m * width);
    let run = code::c_rebuild(&data, log_m, width).unwrap();
    let mut corrupted = run.clone();
    corrupted[5 * width + 1] += Fp::from(1u64);
    let all: Vec<u64> = (0..2 * m as u64).collect();
    let err = decode_run(2 * m as u64, width, Fp::from(1u64), &keep(&corrupted, width, &all)).unwrap_err();
    assert_eq!(err, DecodeError::Inconsistent);
    assert_eq!(decode_run(2 * m as u64, width, Fp::from(1u64), &keep(&run, width, &all)).unwrap(), data);
}

#[test]
fn decode_rejects_bad_input() {
    let b = vec![Fp::from(0u64); 2];
    assert!(matches!(decode_run(4, 2, Fp::from(1u64), &[(4, &b)]), Err(DecodeError::Position { position: 4, size: 4 })));
    assert!(matches!(decode_run(4, 3, Fp::from(1u64), &[(0, &b)]), Err(DecodeError::Width { .. })));
    assert!(matches!(decode_run(6, 2, Fp::from(1u64), &[]), Err(DecodeError::Shape(_))));
    // Duplicates count once.
    let err = decode_run(4, 2, Fp::from(1u64), &[(0, &b), (0, &b)]).unwrap_err();
    assert_eq!(err, DecodeError::TooFewBlocks { have: 1, need: 2 });
}

/// Extraction of a state after writes, with `erase(run_size) -> kept positions`.
fn extract_state(state: &ServerState, rng: &mut impl Rng, erase_fraction_max: f64) -> Result<Vec<Vec<u8>>, ExtractError> {
    let f = state.format();
    let w = f.width();
    let kept = |size: u64, rng: &mut dyn rand::RngCore| -> Vec<u64> {
        let mut p: Vec<u64> = (0..size).collect();
        p.shuffle(rng);
        let max_erase = ((size as f64) * erase_fraction_max).floor() as usize;
        let erase = rng.gen_range(0..=max_erase.min(size as usize / 2));
        p.truncate(size as usize - erase);
        p
    };
    let c_pos = kept(state.c().size(w), rng);
    let c = keep(&state.c().blocks, w, &c_pos);
    let mut levels = Vec::new();
    for l in 0..state.log_blocks() {
        if let Some(run) = state.level(l).unwrap() {
            let pos = kept(run.size(w), rng);
            levels.push((l, keep(&run.blocks, w, &pos)));
        }
    }
    extract(f, state.log_blocks(), state.write_count(), &c, &levels)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Random writes (longer than 2N: several C-rebuilds) against a plain array of
    /// blocks: every read gives the model's block, and extraction from C and H with up
    /// to half of every run erased gives the model's file.
    #[test]
    fn writes_reads_and_extraction_match_a_plain_array(
        log_n in 0u32..=5,
        beta in 1usize..40,
        seed in any::<u64>(),
        extra in 0usize..20,
    ) {
        let mut rng = rng(seed);
        let format = BlockFormat::new(beta).unwrap();
        let n = 1usize << log_n;
        let short = rng.gen_range(0..beta);
        let file = random_block(&mut rng, beta * n - short);
        let layout = FileLayout::new(format, file.len() as u64, 1 << 20).unwrap();
        prop_assert_eq!(layout.num_blocks(), n as u64);
        let mut state = ServerState::from_file(&layout, &file).unwrap();
        let mut model: Vec<Vec<u8>> = layout.split(&file).unwrap();
        let writes = 2 * n + 1 + extra;
        for _ in 0..writes {
            let i = rng.gen_range(0..n);
            let b = random_block(&mut rng, beta);
            state.write(i as u64, b.clone()).unwrap();
            model[i] = b;
            let j = rng.gen_range(0..n);
            prop_assert_eq!(state.read(j as u64).unwrap(), model[j].as_slice());
            if rng.gen_bool(0.3) {
                let got = extract_state(&state, &mut rng, 0.5).unwrap();
                prop_assert_eq!(&got, &model);
            }
        }
        prop_assert!(state.rebuild_count() >= 2);
        let got = extract_state(&state, &mut rng, 0.5).unwrap();
        prop_assert_eq!(layout.join(&got), layout.join(&model));
    }
}

/// With one block more than half erased in a level, extraction fails with that
/// level named; with the levels given wrong, it fails too.
#[test]
fn extraction_fails_past_half_and_on_wrong_levels() {
    let mut rng = rng(12);
    let format = BlockFormat::new(16).unwrap();
    let w = format.width();
    let blocks: Vec<Vec<u8>> = (0..16).map(|_| random_block(&mut rng, 16)).collect();
    let mut state = ServerState::new(format, blocks).unwrap();
    for i in 0..6 {
        state.write(i, random_block(&mut rng, 16)).unwrap();
    }
    // t = 6 = 0b110: levels 1 and 2.
    assert_eq!(state.write_count(), 6);
    let c: Present = keep(&state.c().blocks, w, &(0..32).collect::<Vec<_>>());
    let l1 = state.level(1).unwrap().unwrap();
    let l2 = state.level(2).unwrap().unwrap();
    let l1_all = keep(&l1.blocks, w, &[0, 1, 2, 3]);
    let l2_short = keep(&l2.blocks, w, &[0, 2, 5]);
    let err = extract(&format, 4, 6, &c, &[(1, l1_all.clone()), (2, l2_short)]).unwrap_err();
    assert!(matches!(err, ExtractError::Decode { tag, source: DecodeError::TooFewBlocks { have: 3, need: 4 } } if tag.as_level() == Some(2)));
    let err = extract(&format, 4, 6, &c, &[(1, l1_all)]).unwrap_err();
    assert!(matches!(err, ExtractError::Levels { .. }));
    assert_eq!(level_start(6, 1), 4);
    assert_eq!(level_start(6, 2), 0);
}
