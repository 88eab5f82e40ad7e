//! Testing only: damage a deal's runs on disk the way a provider that lost or
//! deleted data would, by overwriting whole coded blocks with zeros in the run files
//! (`dpor-node erase`; `script/demo` and the end-to-end tests use it). It works on
//! the files alone, so it can run while the node holds the store open; the node keeps
//! serving the zeroed blocks with their true Merkle paths, and every verifier sees
//! them fail.

use anyhow::{bail, Context};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// A run file found on disk: (file name, tag, build time).
fn run_files(deal_dir: &Path) -> anyhow::Result<Vec<(std::path::PathBuf, u32, u64)>> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(deal_dir).with_context(|| format!("cannot list {}", deal_dir.display()))?;
    for e in entries {
        let path = e?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
        let Some(stem) = name.strip_prefix("run-").and_then(|n| n.strip_suffix(".blocks")) else { continue };
        let mut parts = stem.split('-');
        let (Some(tag), Some(built_at), None) = (parts.next(), parts.next(), parts.next()) else { continue };
        if let (Ok(tag), Ok(built_at)) = (tag.parse::<u32>(), built_at.parse::<u64>()) {
            out.push((path, tag, built_at));
        }
    }
    out.sort_by_key(|(_, tag, built_at)| (*tag, *built_at));
    Ok(out)
}

/// Zeroes `fraction` of the coded blocks (chosen by a seeded shuffle) of the runs of
/// `deal` in the store at `store_dir`: all runs, those with tag `tag`, or the largest
/// level. The coded block size is the run file's length over its size in blocks (a
/// level ℓ file, tag ℓ + 1, holds 2^(ℓ+1) blocks; C's size is taken from the deal's
/// level files or, with none, from its own length and β = 4096). Returns
/// (file name, blocks zeroed, blocks in the run) per run.
pub fn erase(
    store_dir: &Path,
    deal: u64,
    fraction: f64,
    tag: Option<u32>,
    largest_level: bool,
    seed: u64,
) -> anyhow::Result<Vec<(String, u64, u64)>> {
    erase_with(store_dir, deal, fraction, tag, largest_level, seed, false)
}

/// [`erase`], or with `keep_half` zeroing only the second half of each chosen coded
/// block: a node that keeps part of every block (issue 9 finding 3), which chunk
/// samples in the first half would not catch but whole-block epoch proofs do.
pub fn erase_with(
    store_dir: &Path,
    deal: u64,
    fraction: f64,
    tag: Option<u32>,
    largest_level: bool,
    seed: u64,
    keep_half: bool,
) -> anyhow::Result<Vec<(String, u64, u64)>> {
    let deal_dir = store_dir.join("deals").join(deal.to_string());
    let mut runs = run_files(&deal_dir)?;
    if runs.is_empty() {
        bail!("no run files for deal {deal} under {}", deal_dir.display());
    }
    // The coded block size, from a level file if there is one.
    let coded = runs
        .iter()
        .find(|(_, t, _)| *t > 0)
        .and_then(|(p, t, _)| Some(std::fs::metadata(p).ok()?.len() >> t))
        .unwrap_or(8 * (1 + 4096u64.div_ceil(7)));
    if let Some(t) = tag {
        runs.retain(|(_, rt, _)| *rt == t);
    }
    if largest_level {
        let top = runs.iter().map(|(_, t, _)| *t).max().unwrap_or(0);
        if top == 0 {
            bail!("deal {deal} has no filled level");
        }
        runs.retain(|(_, t, _)| *t == top);
    }
    let mut report = Vec::new();
    for (path, _, _) in runs {
        let len = std::fs::metadata(&path)?.len();
        let size = len / coded.max(1);
        let erase = ((size as f64) * fraction).floor() as u64;
        // A seeded Fisher–Yates shuffle (splitmix64), so runs are hit reproducibly.
        let mut order: Vec<u64> = (0..size).collect();
        let mut x = seed ^ len;
        for i in (1..order.len()).rev() {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            order.swap(i, (z % (i as u64 + 1)) as usize);
        }
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        let skip = if keep_half { coded / 2 } else { 0 };
        let zeros = vec![0u8; (coded - skip) as usize];
        for &p in &order[..erase as usize] {
            f.seek(SeekFrom::Start(p * coded + skip))?;
            f.write_all(&zeros)?;
        }
        f.sync_all()?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_string();
        report.push((name, erase, size));
    }
    Ok(report)
}
