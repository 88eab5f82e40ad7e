//! The owner's own copy of its smallest levels, kept as it writes (issue 23 #3; the
//! check of App. A.1, docs/SCHEME.md §10).
//!
//! A checkpoint ([`super::batch::verify_deferred`]) checks each unchecked run of a level
//! below the owner state's `block_cache_levels` against the owner's own recomputation of
//! it. Replaying a level's window of writes at the checkpoint (`recompute_level`) costs
//! the HAdds of up to 2^ℓ writes per level, while the node waits (14–17 % of the
//! batched bench's time). Instead, each batch runs the same HAdds on the owner's copy
//! of those levels **while the node applies the batch** ([`advance`], on a blocking
//! thread beside the request), and the checkpoint takes the result: the level's coded
//! blocks, and for the levels it hashes whole, their root.
//!
//! The copy is a cache, never the reference: it is kept in memory only, belongs to one
//! exact owner state (total writes and rootU, [`LocalLevels::at`]), is committed only
//! when the batch it was built for commits, and every level in it is named by its run
//! ([`WireRun`]; the owner state hands out only the levels that name its own runs,
//! `OwnerState::take_local_levels` and `OwnerState::local_level`); a level missing from it (a fresh process, another kind of write, a
//! resize, a crash) is replayed from the block cache as before.

use alloy_primitives::B256;
use dpor_core::block::BlockFormat;
use dpor_core::code;
use dpor_core::field::Fp;
use dpor_core::merkle;
use dpor_core::state::{write_step, WriteStep};
use dpor_core::{RunId, RunTag};
use dpor_proto::messages::WireRun;
use std::collections::BTreeMap;

/// One level of the owner's copy.
#[derive(Debug, Clone)]
pub struct LocalLevel {
    /// The run this level is (tag ℓ + 1, built at total writes).
    pub run: WireRun,
    /// Its 2^(ℓ+1) coded blocks, flat (`width` elements each).
    pub elements: Vec<Fp>,
    /// The root of its run tree, for the levels hashed whole at checkpoints (below
    /// `hashed_below` in [`advance`]); `None` above them.
    pub root: Option<B256>,
}

/// The owner's copy of its smallest levels, for the owner state `at`.
#[derive(Debug, Clone, Default)]
pub struct LocalLevels {
    /// (total writes, rootU) of the owner state these levels belong to.
    pub at: (u64, B256),
    /// Level ℓ → its run.
    pub levels: BTreeMap<u32, LocalLevel>,
}

/// Where a batch starts: the counters of the owner state before it.
#[derive(Debug, Clone, Copy)]
pub struct Counters {
    /// t, writes since the last C-rebuild.
    pub write_count: u64,
    /// C-rebuilds so far.
    pub rebuild_count: u64,
    /// N, blocks.
    pub num_blocks: u64,
}

/// The levels below `keep_below` after the writes `writes` (index, β bytes each, in
/// order), from `levels` (the same levels before them, as [`LocalLevels::for_state`]
/// gives): the HAdds of docs/SCHEME.md §3 on the records, exactly as the node runs
/// them. A level whose consumed levels are not all known is left out (it will be
/// replayed from the block cache if a checkpoint needs it); a C-rebuild empties H.
/// Levels below `hashed_below` also get their run tree's root. Pure; errors only on a
/// malformed block.
pub fn advance(
    mut levels: BTreeMap<u32, LocalLevel>,
    format: &BlockFormat,
    start: Counters,
    writes: &[(u64, Vec<u8>)],
    keep_below: u32,
    hashed_below: u32,
) -> anyhow::Result<BTreeMap<u32, LocalLevel>> {
    let width = format.width();
    let k = start.num_blocks.trailing_zeros();
    let (mut t, mut rebuilds) = (start.write_count, start.rebuild_count);
    for (index, block) in writes {
        match write_step(t, k) {
            WriteStep::Level(l) => {
                let consumed: Vec<Option<LocalLevel>> = (0..l).map(|j| levels.remove(&j)).collect();
                if l < keep_below && consumed.iter().all(Option::is_some) {
                    let record = format.record(*index, block)?;
                    let refs: Vec<&[Fp]> = consumed.iter().flatten().map(|lv| lv.elements.as_slice()).collect();
                    let elements = code::h_add(t, k, &record, &refs, width)?;
                    let run = WireRun::from(RunId { tag: RunTag::level(l), built_at: rebuilds * start.num_blocks + t + 1 });
                    levels.insert(l, LocalLevel { run, elements, root: None });
                }
                t += 1;
            }
            WriteStep::CRebuild => {
                levels.clear();
                t = 0;
                rebuilds += 1;
            }
        }
    }
    for (l, lv) in levels.iter_mut() {
        if *l < hashed_below && lv.root.is_none() {
            let coded = coded_blocks(format, &lv.elements)?;
            lv.root = Some(merkle::run_tree(&coded)?.root());
        }
    }
    Ok(levels)
}

/// The coded blocks (bytes, in position order) of a level's flat elements.
pub fn coded_blocks(format: &BlockFormat, elements: &[Fp]) -> anyhow::Result<Vec<Vec<u8>>> {
    Ok(elements.chunks_exact(format.width()).map(|b| format.coded_to_bytes(b)).collect::<Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpor_core::state::ServerState;
    use rand::{Rng, SeedableRng};

    /// The copy advanced batch by batch (random batch sizes, crossing C-rebuilds, the
    /// copy sometimes lost) against the core's reference server state (`ServerState`,
    /// the model the node is tested against): after every batch, every level the copy
    /// holds is the reference's level, run name and coded blocks, and its root is the
    /// reference run's tree root; a level is missing only when the copy was lost
    /// since it began.
    #[test]
    fn advance_matches_the_reference_server_state() {
        let format = BlockFormat::new(64).unwrap();
        let num_blocks = 32u64;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(23);
        let blocks: Vec<Vec<u8>> = (0..num_blocks).map(|i| vec![i as u8; 64]).collect();
        let mut reference = ServerState::new(format, blocks).unwrap();
        let (keep, hashed) = (4, 2);
        let mut levels = BTreeMap::new();
        let mut lost_at = None;
        let mut held = 0;
        for batch in 0..60 {
            let start = Counters { write_count: reference.write_count(), rebuild_count: reference.rebuild_count(), num_blocks };
            let len = rng.gen_range(1..=12);
            let writes: Vec<(u64, Vec<u8>)> =
                (0..len).map(|_| (rng.gen_range(0..num_blocks), (0..64).map(|_| rng.gen()).collect())).collect();
            for (index, block) in &writes {
                reference.write(*index, block.clone()).unwrap();
            }
            if batch == 20 {
                levels = BTreeMap::new();
                lost_at = Some(start.rebuild_count * num_blocks + start.write_count);
            }
            levels = advance(levels, &format, start, &writes, keep, hashed).unwrap();
            for l in 0..keep {
                let want = reference.level(l).unwrap();
                match (levels.get(&l), want) {
                    (Some(mine), Some(run)) => {
                        held += 1;
                        assert_eq!(mine.run, WireRun::from(run.id()), "level {l} after batch {batch}");
                        assert_eq!(mine.elements, run.blocks, "level {l} after batch {batch}");
                        let coded = coded_blocks(&format, &run.blocks).unwrap();
                        let root = merkle::run_tree(&coded).unwrap().root();
                        assert_eq!(mine.root, (l < hashed).then_some(root), "level {l} root after batch {batch}");
                    }
                    (Some(mine), None) => panic!("the copy holds level {l} ({:?}) that the reference does not", mine.run),
                    (None, Some(run)) => {
                        let since = lost_at.unwrap_or(u64::MAX);
                        // Only a level whose window began before the copy was lost.
                        let window_start = run.built_at - (1u64 << l);
                        assert!(window_start < since, "level {l} ({:?}) missing after batch {batch}", run.id());
                    }
                    (None, None) => {}
                }
            }
        }
        assert!(held > 60, "the copy held only {held} levels over the run");
    }
}
