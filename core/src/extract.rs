//! Extraction (§3, DESIGN §6): the newest version of every block, and so the file,
//! from C and the filled levels of H alone, each possibly missing up to half of its
//! coded blocks, or more generally with e blocks absent and t wrong where
//! e + 2t ≤ m for a run of 2m (error-and-erasure decoding,
//! [`crate::decode::decode_run_correcting`]). No secret is needed. This is what
//! retrievability means.
//!
//! C decodes to U as of the last C-rebuild (records in index order); each filled
//! level decodes to the records written in its window, in write order. Applying the
//! levels from the oldest (highest ℓ) to the newest (level 0) replays every write
//! since the rebuild.

use crate::audit::RunTag;
use crate::block::{BlockError, BlockFormat};
use crate::code::{level_start, y_scale, CodeError};
use crate::decode::{decode_run_correcting, DecodeError, Decoded};
use rayon::prelude::*;
use crate::field::Fp;
use thiserror::Error;

/// Errors of extraction.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExtractError {
    /// A run could not be decoded. (The cause is the error's `source`, so that a
    /// chain printed with `{:#}` shows it once.)
    #[error("run {tag}")]
    Decode {
        /// The run.
        tag: RunTag,
        /// Why.
        source: DecodeError,
    },
    /// A decoded record is not valid data (the cause is the error's `source`).
    #[error("run {tag}")]
    Record {
        /// The run.
        tag: RunTag,
        /// Why.
        source: BlockError,
    },
    /// A decoded record names an index that cannot be there.
    #[error("run {tag}: record names block {index}, expected {expected}")]
    RecordIndex {
        /// The run.
        tag: RunTag,
        /// Index found.
        index: u64,
        /// Index expected (or N for "any below N").
        expected: u64,
    },
    /// The levels given are not exactly the filled levels of t.
    #[error("write count {t} fills levels {expected:?}, got {got:?}")]
    Levels {
        /// t.
        t: u64,
        /// The filled levels.
        expected: Vec<u32>,
        /// The levels given.
        got: Vec<u32>,
    },
    /// A bad shape.
    #[error(transparent)]
    Code(#[from] CodeError),
}

/// The coded blocks present of one run: `(position, block of s elements)`.
pub type Present<'a> = Vec<(u64, &'a [Fp])>;

/// What [`extract_report`] recovered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// The N newest data blocks, β bytes each, in index order.
    pub blocks: Vec<Vec<u8>>,
    /// Per run decoded (C first, then levels from the highest): the positions of the
    /// blocks given that were wrong and were corrected (usually empty).
    pub corrected: Vec<(RunTag, Vec<u64>)>,
}

/// The N newest data blocks (β bytes each, index order) from the blocks present of
/// C and of every filled level (`levels`: `(ℓ, present)`, any order), for a file of
/// N = 2^`log_blocks` blocks with write counter `write_count`. Blocks given may be
/// wrong: each run is decoded with [`decode_run_correcting`].
///
/// Errors: [`ExtractError::Levels`] if `levels` are not exactly the filled levels of
/// t; [`ExtractError::Decode`] naming the run that cannot be decoded (too few blocks,
/// or too many wrong); [`ExtractError::Record`]/[`ExtractError::RecordIndex`] if a
/// decoded record is not a valid record for its run.
pub fn extract(
    format: &BlockFormat,
    log_blocks: u32,
    write_count: u64,
    c: &Present<'_>,
    levels: &[(u32, Present<'_>)],
) -> Result<Vec<Vec<u8>>, ExtractError> {
    extract_report(format, log_blocks, write_count, c, levels).map(|e| e.blocks)
}

/// [`extract`], also reporting the wrong blocks it corrected in each run.
///
/// Errors: as [`extract`].
pub fn extract_report(
    format: &BlockFormat,
    log_blocks: u32,
    write_count: u64,
    c: &Present<'_>,
    levels: &[(u32, Present<'_>)],
) -> Result<Extracted, ExtractError> {
    let n = 1u64 << log_blocks;
    let width = format.width();
    let expected: Vec<u32> = (0..log_blocks).filter(|l| (write_count >> l) & 1 == 1).collect();
    let mut got: Vec<u32> = levels.iter().map(|l| l.0).collect();
    got.sort_unstable();
    if got != expected || write_count >= n {
        return Err(ExtractError::Levels { t: write_count, expected, got });
    }

    let mut sorted: Vec<&(u32, Present<'_>)> = levels.iter().collect();
    sorted.sort_by_key(|l| std::cmp::Reverse(l.0)); // oldest window first
    // Every run decodes independently: C and the levels on rayon's pool at once; the
    // results are then applied (and their errors reported) in the sequential order.
    let mut jobs: Vec<(RunTag, u64, Result<Fp, CodeError>, &Present<'_>)> = vec![(RunTag::C, 2 * n, Ok(Fp::from(1u64)), c)];
    for (level, present) in &sorted {
        jobs.push((RunTag::level(*level), 2u64 << level, y_scale(level_start(write_count, *level), log_blocks), present));
    }
    type Job = Result<Result<Decoded, DecodeError>, CodeError>;
    let results: Vec<Job> = jobs
        .par_iter()
        .map(|(_, size, scale, present)| scale.clone().map(|sc| decode_run_correcting(*size, width, sc, present)))
        .collect();
    let mut results = jobs.iter().map(|j| j.0).zip(results);

    let mut corrected = Vec::new();
    let Some((_, c_result)) = results.next() else {
        return Err(ExtractError::Decode { tag: RunTag::C, source: DecodeError::TooFewBlocks { have: 0, need: n as usize } });
    };
    let decoded = c_result?.map_err(|source| ExtractError::Decode { tag: RunTag::C, source })?;
    corrected.push((RunTag::C, decoded.corrected));
    let mut u = Vec::with_capacity(n as usize);
    for (r, rec) in decoded.data.chunks_exact(width).enumerate() {
        let (index, data) = format.unrecord(rec).map_err(|source| ExtractError::Record { tag: RunTag::C, source })?;
        if index != r as u64 {
            return Err(ExtractError::RecordIndex { tag: RunTag::C, index, expected: r as u64 });
        }
        u.push(data);
    }

    for (tag, result) in results {
        let decoded = result?.map_err(|source| ExtractError::Decode { tag, source })?;
        corrected.push((tag, decoded.corrected));
        for rec in decoded.data.chunks_exact(width) {
            let (index, data) = format.unrecord(rec).map_err(|source| ExtractError::Record { tag, source })?;
            let slot = u.get_mut(index as usize).ok_or(ExtractError::RecordIndex { tag, index, expected: n })?;
            *slot = data;
        }
    }
    Ok(Extracted { blocks: u, corrected })
}
