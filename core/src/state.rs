//! The server state U, C, H (§4.1, Fig. 1) as a value that a write sequence updates.
//!
//! - U: the N up-to-date data blocks (β bytes each), for reads.
//! - C: the coded copy of U as of the last C-rebuild (2N coded blocks).
//! - H: levels 0..k−1; level ℓ, when filled, is a run of 2^(ℓ+1) coded blocks
//!   encoding the 2^ℓ records written in one aligned window since the last C-rebuild.
//!
//! Write t (0 ≤ t < N, counted since the last C-rebuild) sets U[i] and runs HAdd,
//! which fills level [`target_level`]`(t)` and empties the levels below; the N-th
//! write instead rebuilds C from U and empties H (the paper's top level k is exactly
//! that rebuild, so levels here are 0..k−1). The node keeps the same state on disk;
//! this type is the reference it is tested against, and what the property tests run.

use crate::audit::RunTag;
use crate::block::{BlockError, BlockFormat, FileLayout};
use crate::code::{self, target_level, CodeError};
use crate::field::Fp;
use thiserror::Error;

/// Errors of state operations.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StateError {
    /// A block index ≥ N.
    #[error("block index {index} is out of range (N = {num_blocks})")]
    Index {
        /// The index.
        index: u64,
        /// N.
        num_blocks: u64,
    },
    /// A level number ≥ k (levels are 0..k−1; level k is C).
    #[error("level {level} is past the top level {} (k = {log_blocks})", log_blocks.saturating_sub(1))]
    Level {
        /// The level.
        level: u32,
        /// k.
        log_blocks: u32,
    },
    /// A block's bytes were wrong.
    #[error(transparent)]
    Block(#[from] BlockError),
    /// The code rejected a shape (an internal inconsistency).
    #[error(transparent)]
    Code(#[from] CodeError),
}

/// The name of an immutable run (SCHEME.md §3): its tag and its build time, the
/// total number of writes (rebuilds·N + t) when it was built. Unique for a deal's
/// whole life: the node names run files by it and owners, auditors and disputes ask
/// for runs by it ([`crate::digest::Digest::run_ids`] computes it from a digest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId {
    /// Which run: C (tag 0) or level ℓ (tag ℓ + 1).
    pub tag: RunTag,
    /// Total writes when it was built (0 for the C built at upload).
    pub built_at: u64,
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.tag, self.built_at)
    }
}

/// The build time of the run `tag` in a state with `rebuild_count` C-rebuilds, N =
/// 2^`log_blocks` and write counter `write_count` (t): C was built at rebuilds·N; the
/// filled level ℓ holds writes `[level_start(t, ℓ), … + 2^ℓ)` and was built by the
/// last of them, so at rebuilds·N + level_start(t, ℓ) + 2^ℓ. `None` if `tag` names an
/// empty level.
pub fn run_built_at(rebuild_count: u64, log_blocks: u32, write_count: u64, tag: RunTag) -> Option<u64> {
    let base = rebuild_count.checked_mul(1u64.checked_shl(log_blocks)?)?;
    match tag.as_level() {
        None => Some(base),
        Some(level) if level < 64 && (write_count >> level) & 1 == 1 => {
            base.checked_add(code::level_start(write_count, level))?.checked_add(1u64 << level)
        }
        Some(_) => None,
    }
}

/// The C-rebuild count a deal takes when it is resized (App. A.3; docs/SCHEME.md
/// §10.5) from N = 2^`log_blocks` at (`rebuild_count`, `write_count`) to N' =
/// 2^`new_log_blocks`: the least r' with r'·N' above every build time so far
/// (rebuilds·N + t), so the resized C's name `C@r'·N'` and every later run's name
/// stay unique and increasing, and [`run_built_at`] keeps naming runs from
/// (rebuildCount, N, t) alone. `None` on overflow.
pub fn resized_rebuild_count(rebuild_count: u64, log_blocks: u32, write_count: u64, new_log_blocks: u32) -> Option<u64> {
    let total = rebuild_count.checked_mul(1u64.checked_shl(log_blocks)?)?.checked_add(write_count)?;
    (total >> new_log_blocks).checked_add(1)
}

/// An immutable run: C or a level of H, named by its tag and build time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Which run.
    pub tag: RunTag,
    /// Total writes (rebuilds·N + t) when it was built: with the tag, names the run.
    pub built_at: u64,
    /// The coded blocks, `[X | Y]`, flat (`size × width` elements).
    pub blocks: Vec<Fp>,
}

impl Run {
    /// Its name.
    pub fn id(&self) -> RunId {
        RunId { tag: self.tag, built_at: self.built_at }
    }

    /// Coded blocks in the run, given the width.
    pub fn size(&self, width: usize) -> u64 {
        (self.blocks.len() / width.max(1)) as u64
    }

    /// Coded block `position`, or `None` past the end.
    pub fn block(&self, position: u64, width: usize) -> Option<&[Fp]> {
        let start = (position as usize).checked_mul(width)?;
        self.blocks.get(start..start + width)
    }
}

/// What a write with counter `t` does to H and C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteStep {
    /// HAdd fills this level, emptying the levels below it.
    Level(u32),
    /// The N-th write since the last rebuild: C ← encode(U), H emptied.
    CRebuild,
}

/// The step of the write with counter `t` in a file of N = 2^`log_blocks` blocks.
pub fn write_step(t: u64, log_blocks: u32) -> WriteStep {
    let level = target_level(t);
    if level >= log_blocks {
        WriteStep::CRebuild
    } else {
        WriteStep::Level(level)
    }
}

/// The whole server state of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerState {
    format: BlockFormat,
    log_blocks: u32,
    u: Vec<Vec<u8>>,
    c: Run,
    levels: Vec<Option<Run>>,
    write_count: u64,
    rebuild_count: u64,
}

impl ServerState {
    /// Init: U = `blocks` (N = 2^k blocks of β bytes), C = encode(U), H empty.
    pub fn new(format: BlockFormat, blocks: Vec<Vec<u8>>) -> Result<Self, StateError> {
        let n = blocks.len() as u64;
        if n == 0 || !n.is_power_of_two() {
            return Err(CodeError::NotPowerOfTwo(blocks.len()).into());
        }
        let log_blocks = n.trailing_zeros();
        let c = Run { tag: RunTag::C, built_at: 0, blocks: encode_u(&format, log_blocks, &blocks)? };
        Ok(Self {
            format,
            log_blocks,
            u: blocks,
            c,
            levels: vec![None; log_blocks as usize],
            write_count: 0,
            rebuild_count: 0,
        })
    }

    /// Init from a file's bytes laid out by `layout`.
    pub fn from_file(layout: &FileLayout, file: &[u8]) -> Result<Self, StateError> {
        Self::new(layout.format, layout.split(file)?)
    }

    /// The block format.
    pub fn format(&self) -> &BlockFormat {
        &self.format
    }

    /// k = log2 N.
    pub fn log_blocks(&self) -> u32 {
        self.log_blocks
    }

    /// N.
    pub fn num_blocks(&self) -> u64 {
        1u64 << self.log_blocks
    }

    /// t, writes since the last C-rebuild.
    pub fn write_count(&self) -> u64 {
        self.write_count
    }

    /// C-rebuilds so far.
    pub fn rebuild_count(&self) -> u64 {
        self.rebuild_count
    }

    /// Total writes: rebuilds·N + t.
    pub fn total_writes(&self) -> u64 {
        self.rebuild_count * self.num_blocks() + self.write_count
    }

    /// All of U.
    pub fn u(&self) -> &[Vec<u8>] {
        &self.u
    }

    /// Read(i): U[i].
    pub fn read(&self, index: u64) -> Result<&[u8], StateError> {
        self.u
            .get(index as usize)
            .map(|b| b.as_slice())
            .ok_or(StateError::Index { index, num_blocks: self.num_blocks() })
    }

    /// C.
    pub fn c(&self) -> &Run {
        &self.c
    }

    /// Level ℓ of H (`None` if empty); errors if ℓ ≥ k.
    pub fn level(&self, level: u32) -> Result<Option<&Run>, StateError> {
        self.levels
            .get(level as usize)
            .map(|l| l.as_ref())
            .ok_or(StateError::Level { level, log_blocks: self.log_blocks })
    }

    /// C and the filled levels, in run order (C, then levels ascending).
    pub fn runs(&self) -> Vec<&Run> {
        std::iter::once(&self.c).chain(self.levels.iter().flatten()).collect()
    }

    /// Write(i, B): U[i] = B, then HAdd (or, on the N-th write, CRebuild). Returns
    /// what was rebuilt. Errors (changing nothing) on a bad index or block length.
    pub fn write(&mut self, index: u64, block: Vec<u8>) -> Result<WriteStep, StateError> {
        if index >= self.num_blocks() {
            return Err(StateError::Index { index, num_blocks: self.num_blocks() });
        }
        let record = self.format.record(index, &block)?;
        let step = write_step(self.write_count, self.log_blocks);
        let built_at = self.total_writes() + 1;
        match step {
            WriteStep::Level(level) => {
                let consumed: Vec<&[Fp]> = self.levels[..level as usize]
                    .iter()
                    .map(|l| l.as_ref().map(|r| r.blocks.as_slice()).unwrap_or(&[]))
                    .collect();
                let blocks = code::h_add(self.write_count, self.log_blocks, &record, &consumed, self.format.width())?;
                self.u[index as usize] = block;
                for l in &mut self.levels[..level as usize] {
                    *l = None;
                }
                self.levels[level as usize] = Some(Run { tag: RunTag::level(level), built_at, blocks });
                self.write_count += 1;
            }
            WriteStep::CRebuild => {
                let mut u = self.u.clone();
                u[index as usize] = block;
                let blocks = encode_u(&self.format, self.log_blocks, &u)?;
                self.u = u;
                self.c = Run { tag: RunTag::C, built_at, blocks };
                self.levels.iter_mut().for_each(|l| *l = None);
                self.write_count = 0;
                self.rebuild_count += 1;
            }
        }
        Ok(step)
    }
}

impl ServerState {
    /// Resize (App. A.3): N becomes `new_num_blocks` (a power of two). U keeps its
    /// first min(N, N') blocks and grows with zero blocks; C is rebuilt for N' from
    /// the new U and H is emptied; t = 0 and the rebuild count jumps to
    /// [`resized_rebuild_count`], so the new C is `C@r'·N'`. Errors (changing
    /// nothing) if N' is not a power of two or equals N.
    pub fn resize(&mut self, new_num_blocks: u64) -> Result<(), StateError> {
        if new_num_blocks == 0 || !new_num_blocks.is_power_of_two() || new_num_blocks == self.num_blocks() {
            return Err(CodeError::NotPowerOfTwo(new_num_blocks as usize).into());
        }
        let new_log = new_num_blocks.trailing_zeros();
        let rebuilds = resized_rebuild_count(self.rebuild_count, self.log_blocks, self.write_count, new_log)
            .ok_or(CodeError::NotPowerOfTwo(new_num_blocks as usize))?;
        let mut u = self.u.clone();
        u.resize(new_num_blocks as usize, vec![0; self.format.block_bytes()]);
        let blocks = encode_u(&self.format, new_log, &u)?;
        self.u = u;
        self.log_blocks = new_log;
        self.c = Run { tag: RunTag::C, built_at: rebuilds << new_log, blocks };
        self.levels = vec![None; new_log as usize];
        self.write_count = 0;
        self.rebuild_count = rebuilds;
        Ok(())
    }
}

/// The records of U (index order, flat) for CRebuild.
pub fn u_records(format: &BlockFormat, blocks: &[Vec<u8>]) -> Result<Vec<Fp>, BlockError> {
    use rayon::prelude::*;
    if let Some(b) = blocks.iter().find(|b| b.len() != format.block_bytes()) {
        return Err(BlockError::DataLength { got: b.len(), expected: format.block_bytes() });
    }
    // Built in place on every core, element by element: an indexed parallel collect
    // writes each element once into the final vector (no per-block vectors, and the
    // fresh pages are touched by both threads).
    let w = format.width();
    Ok((0..blocks.len() * w)
        .into_par_iter()
        .map(|j| format.record_element((j / w) as u64, &blocks[j / w], j % w))
        .collect())
}

fn encode_u(format: &BlockFormat, log_blocks: u32, blocks: &[Vec<u8>]) -> Result<Vec<Fp>, StateError> {
    Ok(code::c_rebuild(&u_records(format, blocks)?, log_blocks, format.width())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u_records_built_in_place_match_each_blocks_record() {
        let format = BlockFormat::new(100).unwrap();
        let blocks: Vec<Vec<u8>> = (0..37u8)
            .map(|i| (0..100u8).map(|j| i.wrapping_mul(31).wrapping_add(j.wrapping_mul(7))).collect())
            .collect();
        let expected: Vec<Fp> =
            blocks.iter().enumerate().flat_map(|(i, b)| format.record(i as u64, b).unwrap()).collect();
        assert_eq!(u_records(&format, &blocks).unwrap(), expected);
        let mut bad = blocks.clone();
        bad[5].pop();
        assert_eq!(u_records(&format, &bad), Err(BlockError::DataLength { got: 99, expected: 100 }));
    }

    fn state() -> ServerState {
        let format = BlockFormat::new(8).unwrap();
        ServerState::new(format, (0..4u8).map(|i| vec![i; 8]).collect()).unwrap()
    }

    #[test]
    fn bad_input_is_a_typed_error_and_changes_nothing() {
        let mut s = state();
        let before = s.clone();
        assert_eq!(s.write(4, vec![0; 8]), Err(StateError::Index { index: 4, num_blocks: 4 }));
        assert_eq!(s.write(1, vec![0; 7]), Err(StateError::Block(BlockError::DataLength { got: 7, expected: 8 })));
        assert_eq!(s, before, "a rejected write changes nothing");
        assert_eq!(s.read(9), Err(StateError::Index { index: 9, num_blocks: 4 }));
        assert_eq!(s.level(2), Err(StateError::Level { level: 2, log_blocks: 2 }));
        assert_eq!(s.level(1), Ok(None));
        let format = BlockFormat::new(8).unwrap();
        assert!(matches!(ServerState::new(format, vec![vec![0; 8]; 3]), Err(StateError::Code(CodeError::NotPowerOfTwo(3)))));
        assert!(matches!(ServerState::new(format, vec![]), Err(StateError::Code(_))));
    }

    #[test]
    fn write_steps_follow_the_binary_counter() {
        let mut s = state();
        let steps: Vec<WriteStep> = (0..9).map(|i| s.write(i % 4, vec![9; 8]).unwrap()).collect();
        use WriteStep::*;
        assert_eq!(steps, vec![Level(0), Level(1), Level(0), CRebuild, Level(0), Level(1), Level(0), CRebuild, Level(0)]);
        assert_eq!((s.rebuild_count(), s.write_count(), s.total_writes()), (2, 1, 9));
        assert_eq!(s.runs().iter().map(|r| (r.tag, r.built_at)).collect::<Vec<_>>(), vec![(RunTag::C, 8), (RunTag::level(0), 9)]);
    }

    #[test]
    fn resize_grows_and_shrinks_with_unique_increasing_run_names() {
        let format = BlockFormat::new(8).unwrap();
        let blocks: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i + 1; 8]).collect();
        let mut s = ServerState::new(format, blocks.clone()).unwrap();
        let mut seen = vec![s.c().built_at];
        for w in 0..3u64 {
            s.write(w, vec![9; 8]).unwrap();
            seen.extend(s.runs().iter().map(|r| r.built_at));
        }
        // Grow 4 → 16: U padded with zero blocks; C = encode(new U) (independent reference:
        // a fresh state from the same blocks), H empty, names above every earlier one.
        s.resize(16).unwrap();
        let mut expect_u: Vec<Vec<u8>> = vec![vec![9; 8], vec![9; 8], vec![9; 8], vec![4; 8]];
        expect_u.resize(16, vec![0; 8]);
        let fresh = ServerState::new(format, expect_u.clone()).unwrap();
        assert_eq!(s.u(), fresh.u());
        assert_eq!(s.c().blocks, fresh.c().blocks);
        assert_eq!((s.num_blocks(), s.write_count(), s.runs().len()), (16, 0, 1));
        assert!(seen.iter().all(|b| *b < s.c().built_at), "{seen:?} vs {}", s.c().built_at);
        assert_eq!(run_built_at(s.rebuild_count(), s.log_blocks(), 0, RunTag::C), Some(s.c().built_at));
        seen.push(s.c().built_at);
        for w in 0..21u64 {
            s.write(w % 16, vec![w as u8; 8]).unwrap();
            for r in s.runs() {
                assert_eq!(run_built_at(s.rebuild_count(), s.log_blocks(), s.write_count(), r.tag), Some(r.built_at));
            }
            let newest = s.runs().iter().map(|r| r.built_at).max().unwrap();
            assert!(seen.iter().all(|b| *b <= newest));
            seen.push(newest);
        }
        // Shrink 16 → 2 right after: the new C's name is still above every earlier one
        // (a plain rebuilds·N' would have gone back in time).
        let before: Vec<Vec<u8>> = s.u()[..2].to_vec();
        s.resize(2).unwrap();
        assert_eq!(s.u(), &before[..]);
        assert!(seen.iter().all(|b| *b < s.c().built_at));
        assert_eq!(s.c().blocks, ServerState::new(format, before).unwrap().c().blocks);
        // Bad sizes change nothing.
        let keep = s.clone();
        assert!(s.resize(2).is_err() && s.resize(3).is_err() && s.resize(0).is_err());
        assert_eq!(s, keep);
    }

    #[test]
    fn run_built_at_names_every_live_run() {
        // Against the state itself: after every write, each live run's build time is
        // what run_built_at computes from (rebuilds, k, t) alone.
        let format = BlockFormat::new(8).unwrap();
        let mut s = ServerState::new(format, (0..8u8).map(|i| vec![i; 8]).collect()).unwrap();
        for w in 0..40u64 {
            for run in s.runs() {
                assert_eq!(
                    run_built_at(s.rebuild_count(), s.log_blocks(), s.write_count(), run.tag),
                    Some(run.built_at),
                    "write {w}, run {}", run.id()
                );
            }
            for level in 0..3 {
                if s.level(level).unwrap().is_none() {
                    assert_eq!(run_built_at(s.rebuild_count(), s.log_blocks(), s.write_count(), RunTag::level(level)), None);
                }
            }
            s.write(w % 8, vec![w as u8; 8]).unwrap();
        }
    }
}
