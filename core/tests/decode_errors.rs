//! Error-and-erasure decoding (issue 10, finding 1) against a plain-array reference:
//! runs are encoded with the brute-force generator matrix (independent of `code.rs`),
//! blocks are erased and *corrupted* (committed wrong), and the decoder must return
//! the plain array whenever erasures + 2·errors ≤ m, and a clear error just past it.
//! Also: extraction of a written file with wrong blocks in every run, and the
//! block-by-block proof of what a damaged provider serves (`salvage`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use dpor_core::block::{BlockFormat, FileLayout};
use dpor_core::code::y_scale;
use dpor_core::decode::{decode_run, decode_run_correcting, DecodeError, Decoded};
use dpor_core::extract::{extract_report, ExtractError, Present};
use dpor_core::field::Fp;
use dpor_core::merkle;
use dpor_core::salvage::{prove_served, Served};
use dpor_core::state::ServerState;
use dpor_core::RunTag;
use alloy_primitives::B256;
use ark_ff::Field;
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::Rng;

/// How the erased and wrong positions are placed.
#[derive(Debug, Clone, Copy)]
enum Pattern {
    /// Uniformly at random.
    Random,
    /// Errors first in the X half, erasures in the Y half.
    ErrorsInX,
    /// Errors first in the Y half, erasures in the X half.
    ErrorsInY,
    /// Errors and erasures in one contiguous stretch of positions.
    Contiguous,
    /// Butterfly pairs (p, p + m): the two outputs of one `mix`.
    Butterfly,
    /// Even evaluation points then odd ones (bit-reversal-friendly).
    Interleaved,
}

const PATTERNS: [Pattern; 6] =
    [Pattern::Random, Pattern::ErrorsInX, Pattern::ErrorsInY, Pattern::Contiguous, Pattern::Butterfly, Pattern::Interleaved];

/// An order of all 2m positions: the first `t` become errors, the next `e` erasures.
fn order(pattern: Pattern, m: usize, rng: &mut impl Rng) -> Vec<u64> {
    let two_m = 2 * m as u64;
    let mut p: Vec<u64> = (0..two_m).collect();
    match pattern {
        Pattern::Random => p.shuffle(rng),
        Pattern::ErrorsInX => {}
        Pattern::ErrorsInY => p.reverse(),
        Pattern::Contiguous => {
            let s = rng.gen_range(0..two_m);
            p = (0..two_m).map(|i| (s + i) % two_m).collect();
        }
        Pattern::Butterfly => {
            let mut q: Vec<u64> = (0..m as u64).collect();
            q.shuffle(rng);
            p = q.iter().flat_map(|&i| [i, i + m as u64]).collect();
        }
        Pattern::Interleaved => {
            p = (0..m as u64).chain(m as u64..two_m).collect();
            p.sort_by_key(|&x| (x % 2, x));
        }
    }
    p
}

/// Adds a nonzero value to some columns (at least one) of block `p`.
fn corrupt(run: &mut [Fp], width: usize, p: u64, rng: &mut impl Rng) {
    let all_columns = rng.gen_bool(0.3);
    let first = rng.gen_range(0..width);
    for c in 0..width {
        if c == first || (all_columns && rng.gen_bool(0.5)) {
            run[p as usize * width + c] += Fp::from(rng.gen_range(1..u64::MAX >> 1));
        }
    }
}

/// Encodes `data` (m × width) as a run with Y scale `scale` by the generator matrix.
fn reference_run(data: &[Fp], m: usize, width: usize, scale: Fp) -> Vec<Fp> {
    matrix_encode(&generator_matrix(m, scale), data, width)
}

fn present<'a>(run: &'a [Fp], width: usize, positions: &[u64]) -> Present<'a> {
    positions.iter().map(|&p| (p, &run[p as usize * width..(p as usize + 1) * width])).collect()
}

/// A run of m = 2^log_m random blocks, with `t` wrong and `e` erased by `pattern`:
/// (data, damaged run, positions present, wrong positions sorted).
fn damaged(
    rng: &mut impl Rng,
    log_m: u32,
    width: usize,
    scale: Fp,
    e: usize,
    t: usize,
    pattern: Pattern,
) -> (Vec<Fp>, Vec<Fp>, Vec<u64>, Vec<u64>) {
    let m = 1usize << log_m;
    let data = random_elements(rng, m * width);
    let mut run = reference_run(&data, m, width, scale);
    let ord = order(pattern, m, rng);
    let mut wrong = ord[..t].to_vec();
    for &p in &wrong {
        corrupt(&mut run, width, p, rng);
    }
    let mut kept: Vec<u64> = ord[..t].iter().chain(&ord[t + e..]).copied().collect();
    kept.shuffle(rng);
    wrong.sort_unstable();
    (data, run, kept, wrong)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, .. ProptestConfig::default() })]

    /// Up to the bound (e + 2t ≤ m, often exactly at it): the plain array back, and
    /// exactly the wrong positions reported.
    #[test]
    fn corrects_errors_and_erasures_up_to_the_bound(
        log_m in 0u32..=7,
        width in 1usize..=4,
        seed in any::<u64>(),
        pattern in 0usize..PATTERNS.len(),
        at_bound in any::<bool>(),
        level_scale in any::<bool>(),
    ) {
        let mut rng = rng(seed);
        let m = 1usize << log_m;
        let scale = if level_scale { y_scale(rng.gen_range(0..64), 7).unwrap() } else { Fp::from(1u64) };
        let e = rng.gen_range(0..=m);
        let max_t = (m - e) / 2;
        let t = if at_bound { max_t } else { rng.gen_range(0..=max_t) };
        let (data, run, kept, wrong) = damaged(&mut rng, log_m, width, scale, e, t, PATTERNS[pattern]);
        let got = decode_run_correcting(2 * m as u64, width, scale, &present(&run, width, &kept));
        prop_assert_eq!(got, Ok(Decoded { data, corrected: wrong }), "m {} e {} t {} {:?}", m, e, t, PATTERNS[pattern]);
    }

    /// Just past the bound (e + 2t = m + 1 or m + 2, at least one wrong block, and
    /// more than m blocks present so that there is something to check against): a
    /// clear error, never data. (With exactly m blocks present nothing can be
    /// checked by anyone without a secret; the owner's rootU check catches that.)
    #[test]
    fn just_past_the_bound_is_a_clear_error(
        log_m in 0u32..=7,
        width in 1usize..=4,
        seed in any::<u64>(),
        pattern in 0usize..PATTERNS.len(),
        over in 1usize..=2,
    ) {
        let mut rng = rng(seed);
        let m = 1usize << log_m;
        let t_min = over / 2 + 1; // e = m + over − 2t < m
        prop_assume!(t_min <= (m + over) / 2);
        let t = rng.gen_range(t_min..=(m + over) / 2);
        let e = (m + over) - 2 * t;
        prop_assert!(e < m);
        let (_, run, kept, _) = damaged(&mut rng, log_m, width, Fp::from(1u64), e, t, PATTERNS[pattern]);
        let got = decode_run_correcting(2 * m as u64, width, Fp::from(1u64), &present(&run, width, &kept));
        match got {
            Err(DecodeError::TooManyErrors { size, erased, max_errors }) => {
                prop_assert_eq!((size, erased), (2 * m as u64, e));
                prop_assert_eq!(max_errors, (m - e) / 2);
            }
            Err(DecodeError::TooFewBlocks { .. }) => prop_assert!(e + t > m),
            other => prop_assert!(false, "m {} e {} t {}: {:?}", m, e, t, other.map(|d| d.corrected)),
        }
    }
}

/// Adversarial placements at exactly the bound in a 2^8-block run of 3 columns
/// (C's shape and a level's), each pattern with a few erasure/error splits.
#[test]
fn adversarial_patterns_at_the_bound() {
    let mut rng = rng(101);
    let (log_m, width) = (7u32, 3usize);
    let m = 1usize << log_m;
    for pattern in PATTERNS {
        for e in [0, 1, m / 2, m - 2, m] {
            let t = (m - e) / 2;
            for scale in [Fp::from(1u64), y_scale(5, 9).unwrap()] {
                let (data, run, kept, wrong) = damaged(&mut rng, log_m, width, scale, e, t, pattern);
                let got = decode_run_correcting(2 * m as u64, width, scale, &present(&run, width, &kept)).unwrap();
                assert_eq!(got.data, data, "{pattern:?} e {e} t {t}");
                assert_eq!(got.corrected, wrong, "{pattern:?} e {e} t {t}");
                // The erasure-only decoder refuses the same input whenever a wrong block is in it.
                if t > 0 {
                    assert_eq!(decode_run(2 * m as u64, width, scale, &present(&run, width, &kept)), Err(DecodeError::Inconsistent));
                }
            }
        }
    }
}

/// One wrong block and no erasure (the case), at every level size up to
/// 2^12 blocks; a wrong block that differs in one element of one column only.
#[test]
fn one_wrong_block_is_corrected_at_every_size() {
    let mut rng = rng(102);
    let width = 2;
    for log_m in 1..=12u32 {
        let m = 1usize << log_m;
        let data = random_elements(&mut rng, m * width);
        let mut run = hadd_window(&data, 0, log_m, log_m + 1, width);
        let p = rng.gen_range(0..2 * m as u64);
        run[p as usize * width + 1] += Fp::from(1u64);
        let all: Vec<u64> = (0..2 * m as u64).collect();
        let scale = y_scale(0, log_m + 1).unwrap();
        let got = decode_run_correcting(2 * m as u64, width, scale, &present(&run, width, &all)).unwrap();
        assert_eq!((got.data, got.corrected), (data, vec![p]), "2^{log_m}");
    }
}

/// The bound is tight, and why the owner also checks checksums: another codeword
/// differs from the true one in m + 1 positions at least; moving m/2 + 1 of those
/// onto it (one wrong block past the bound) leaves the true codeword farther than
/// the other, so *any* decoder returns the other one. The secret-free decoder can
/// only promise the bound; the owner's checksums and rootU catch the rest
/// (`verifier-cli/tests/extract_damage.rs`).
#[test]
fn past_the_bound_a_crafted_other_codeword_is_indistinguishable_without_checksums() {
    let mut rng = rng(103);
    let (log_m, width) = (4u32, 2usize);
    let m = 1usize << log_m;
    let scale = Fp::from(1u64);
    let data = random_elements(&mut rng, m * width);
    // D(x) = Π (x − ω^{2i}) over the first m − 1 X points: degree m − 1, so data + D
    // is another file whose encoding differs in exactly m + 1 positions.
    let omega = dpor_core::field::root_of_unity(log_m + 1).unwrap();
    let mut d = vec![Fp::from(1u64)];
    for i in 0..m - 1 {
        let a = omega.pow([2 * i as u64]);
        let mut next = vec![Fp::from(0u64); d.len() + 1];
        for (k, c) in d.iter().enumerate() {
            next[k + 1] += *c;
            next[k] -= *c * a;
        }
        d = next;
    }
    let mut other_data = data.clone();
    for r in 0..m {
        other_data[r * width] += d[dpor_core::code::bit_reverse(r as u64, log_m) as usize];
    }
    let run = reference_run(&data, m, width, scale);
    let other = reference_run(&other_data, m, width, scale);
    let differ: Vec<usize> = (0..2 * m).filter(|&p| run[p * width..(p + 1) * width] != other[p * width..(p + 1) * width]).collect();
    assert_eq!(differ.len(), m + 1);
    let mut received = run.clone();
    let moved = m / 2 + 1; // wrong blocks: one past the bound (e = 0, bound m/2)
    for &p in &differ[..moved] {
        received[p * width..(p + 1) * width].copy_from_slice(&other[p * width..(p + 1) * width]);
    }
    let all: Vec<u64> = (0..2 * m as u64).collect();
    let got = decode_run_correcting(2 * m as u64, width, scale, &present(&received, width, &all)).unwrap();
    assert_eq!(got.data, other_data, "the closest codeword is the other one");
    assert_eq!(got.corrected.len(), m + 1 - moved);
}

/// Runs of a written file with wrong and absent blocks; `t_of(m, e)` picks the
/// number of wrong blocks of each run.
type ExtractOutcome = (Result<dpor_core::extract::Extracted, ExtractError>, Vec<(RunTag, Vec<u64>)>);

fn extract_damaged(
    state: &ServerState,
    rng: &mut impl Rng,
    t_of: &dyn Fn(usize, usize) -> usize,
) -> ExtractOutcome {
    let f = state.format();
    let w = f.width();
    let mut runs: Vec<(RunTag, Vec<Fp>)> = vec![(RunTag::C, state.c().blocks.clone())];
    for l in 0..state.log_blocks() {
        if let Some(r) = state.level(l).unwrap() {
            runs.push((RunTag::level(l), r.blocks.clone()));
        }
    }
    let mut kept = Vec::new();
    let mut wrong_all = Vec::new();
    for (tag, blocks) in &mut runs {
        let size = blocks.len() / w;
        let m = size / 2;
        let e = rng.gen_range(0..=m);
        let t = t_of(m, e);
        let ord = order(PATTERNS[rng.gen_range(0..PATTERNS.len())], m, rng);
        let t = t.min(size - e);
        let mut wrong = ord[..t].to_vec();
        for &p in &wrong {
            corrupt(blocks, w, p, rng);
        }
        kept.push(ord[..t].iter().chain(&ord[t + e..]).copied().collect::<Vec<u64>>());
        wrong.sort_unstable();
        wrong_all.push((*tag, wrong));
    }
    let c = present(&runs[0].1, w, &kept[0]);
    let levels: Vec<(u32, Present)> = runs[1..]
        .iter()
        .zip(&kept[1..])
        .map(|((tag, b), k)| (tag.as_level().unwrap(), present(b, w, k)))
        .collect();
    (extract_report(f, state.log_blocks(), state.write_count(), &c, &levels), wrong_all)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, .. ProptestConfig::default() })]

    /// Random writes against a plain array; every run then gets erasures and wrong
    /// blocks within the bound: extraction gives the array and names every wrong
    /// block. One more wrong block than the bound in one run: an error naming a run.
    #[test]
    fn extraction_with_wrong_blocks_in_every_run_matches_a_plain_array(
        log_n in 1u32..=5,
        beta in 1usize..30,
        seed in any::<u64>(),
        writes in 0usize..80,
    ) {
        let mut rng = rng(seed);
        let format = BlockFormat::new(beta).unwrap();
        let n = 1usize << log_n;
        let file = random_block(&mut rng, beta * n);
        let layout = FileLayout::new(format, file.len() as u64, 1 << 20).unwrap();
        let mut state = ServerState::from_file(&layout, &file).unwrap();
        let mut model = layout.split(&file).unwrap();
        for _ in 0..writes {
            let i = rng.gen_range(0..n);
            let b = random_block(&mut rng, beta);
            state.write(i as u64, b.clone()).unwrap();
            model[i] = b;
        }
        let (got, wrong) = extract_damaged(&state, &mut rng, &|m, e| (m - e) / 2);
        let got = got.unwrap();
        prop_assert_eq!(&got.blocks, &model);
        let mut reported = got.corrected.clone();
        reported.sort();
        let mut expected = wrong.clone();
        expected.sort();
        prop_assert_eq!(reported, expected);

        // Past the bound in every run: an error (never the wrong file). Runs with
        // exactly m blocks left decode to garbage nobody can check without a secret;
        // the records' index fields catch that here.
        let (got, _) = extract_damaged(&state, &mut rng, &|m, e| (m - e) / 2 + 1);
        match got {
            Err(ExtractError::Decode { source: DecodeError::TooManyErrors { .. } | DecodeError::TooFewBlocks { .. }, .. })
            | Err(ExtractError::Record { .. } | ExtractError::RecordIndex { .. }) => {}
            other => prop_assert!(false, "{:?}", other.map(|e| e.corrected)),
        }
    }
}

/// The stored tree of `leaves`, layer by layer (leaves first, root last).
fn layers(leaves: &[B256]) -> Vec<Vec<B256>> {
    let mut out = vec![leaves.to_vec()];
    while out.last().unwrap().len() > 1 {
        let next = out.last().unwrap().chunks(2).map(|p| merkle::node(&p[0], &p[1])).collect();
        out.push(next);
    }
    out
}

/// What a damaged provider serves: paths read from `stored` (missing above
/// `tree_height`), blocks given by `leaf_of`.
fn serve(stored: &[Vec<B256>], tree_height: usize, leaf_of: &dyn Fn(usize) -> Option<B256>) -> Vec<Served> {
    let size = stored[0].len();
    let depth = stored.len() - 1;
    (0..size)
        .map(|p| Served {
            leaf: leaf_of(p),
            path: (0..depth.min(tree_height)).map(|h| stored[h][(p >> h) ^ 1]).collect(),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    /// Whatever is damaged (blocks wrong or absent, stored nodes overwritten, the
    /// tree truncated or absent), a proven block is always the true one; and the
    /// proof is complete where it must be: with an intact tree every intact block is
    /// proven, and with every block intact every block is proven whatever the tree.
    #[test]
    fn salvage_is_sound_and_complete_where_it_must_be(
        log_size in 0u32..=8,
        seed in any::<u64>(),
        bad_blocks in 0usize..20,
        bad_nodes in 0usize..6,
        tree_cut in 0usize..=9,
    ) {
        let mut rng = rng(seed);
        let size = 1usize << log_size;
        let leaves: Vec<_> = (0..size).map(|p| merkle::run_leaf(p as u64, &merkle::block_root(&random_block(&mut rng, 40)))).collect();
        let truth = layers(&leaves);
        let root = truth.last().unwrap()[0];
        let depth = log_size as usize;
        // Damaged blocks: absent or wrong.
        let mut served_leaf: Vec<Option<_>> = leaves.iter().map(|l| Some(*l)).collect();
        for _ in 0..bad_blocks.min(size) {
            let p = rng.gen_range(0..size);
            served_leaf[p] = if rng.gen_bool(0.5) { None } else { Some(B256::repeat_byte(0xee)) };
        }
        // Damaged stored tree: nodes overwritten (32 bytes each), tree cut short.
        let mut stored = truth.clone();
        for _ in 0..bad_nodes {
            let h = rng.gen_range(0..=depth);
            let i = rng.gen_range(0..stored[h].len());
            stored[h][i] = B256::repeat_byte(rng.gen());
        }
        let height = if tree_cut > depth { depth } else { tree_cut };
        let served = serve(&stored, height, &|p| served_leaf[p]);
        let proven = prove_served(&root, &served).unwrap();
        for p in 0..size {
            if proven[p] {
                prop_assert_eq!(served_leaf[p], Some(leaves[p]), "position {} proven with a wrong block", p);
            }
        }
        let intact: Vec<bool> = (0..size).map(|p| served_leaf[p] == Some(leaves[p])).collect();
        // Intact tree, any blocks damaged: exactly the intact blocks.
        let served_tree_ok = serve(&truth, depth, &|p| served_leaf[p]);
        prop_assert_eq!(prove_served(&root, &served_tree_ok).unwrap(), intact.clone());
        // Every block intact, tree damaged or cut anywhere: all proven.
        let all_ok = serve(&stored, height, &|p| Some(leaves[p]));
        prop_assert!(prove_served(&root, &all_ok).unwrap().iter().all(|x| *x));
    }
}

/// The two cases at C's shape: the last S/2 − 1 blocks gone with an intact
/// tree, and 32 bytes of the tree overwritten at every height with intact blocks; and
/// both at once in different halves.
#[test]
fn salvage_truncated_runs_and_overwritten_trees() {
    let mut rng = rng(104);
    let size = 1usize << 10;
    let leaves: Vec<_> = (0..size).map(|p| merkle::run_leaf(p as u64, &merkle::block_root(&random_block(&mut rng, 40)))).collect();
    let truth = layers(&leaves);
    let root = truth.last().unwrap()[0];
    let depth = 10;
    let truncated = serve(&truth, depth, &|p| (p < size / 2 + 1).then(|| leaves[p]));
    let proven = prove_served(&root, &truncated).unwrap();
    assert_eq!(proven.iter().filter(|x| **x).count(), size / 2 + 1);
    for h in 0..depth {
        for i in [0, truth[h].len() - 1] {
            let mut stored = truth.clone();
            stored[h][i] = B256::repeat_byte(0x5a);
            let served = serve(&stored, depth, &|p| Some(leaves[p]));
            assert!(prove_served(&root, &served).unwrap().iter().all(|x| *x), "node ({h}, {i}) overwritten");
            // Plus the last quarter of the blocks gone: the damaged node at the front.
            if i == 0 {
                let served = serve(&stored, depth, &|p| (p < 3 * size / 4).then(|| leaves[p]));
                let n = prove_served(&root, &served).unwrap().iter().filter(|x| **x).count();
                assert_eq!(n, 3 * size / 4, "node ({h}, 0) overwritten and the last quarter gone");
            }
        }
    }
}
