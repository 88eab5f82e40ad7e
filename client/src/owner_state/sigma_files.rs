//! The owner's checksum sidecars: binary files beside the state file that hold the
//! checksums σ of runs (ρ canonical field values per position), so that the JSON state
//! stays a few kilobytes however many levels the owner caches (issue 23: a state file
//! that carried its cached σ as JSON numbers cost ≈ 1.5 MB of text per save, twice per
//! write).
//!
//! A sidecar is named by its content: `<state>.sigma.<16 hex digits>`, the first 8 bytes
//! of the keccak256 check its last 32 bytes carry. It is written whole (temp file,
//! fsync, rename, fsync of the folder) before any state that names it is saved, never
//! changed afterwards, and deleted once the saved state names it no more
//! ([`collect_garbage`]). A name thus always means one content: a resize, which can
//! give a run a name an older run had, cannot make a state read another run's σ.
//!
//! A sidecar of at most [`INLINE_MAX_VALUES`] values is kept inside the state file
//! instead (its slots' blob, `super::slots`, written with the state that names it), by
//! the same name: the new level of all but one in 2^12 single writes and of 7 in 8
//! batches, which would otherwise cost a file of its own each (create, fsync, rename,
//! folder fsync, and its deletion later).
//!
//! Format (little-endian): magic `dpor-sigma-2`, the number of runs (u64), then per run
//! its tag (u32), `built_at` (u64), the number of values (u64) and the values (u64
//! each); then keccak256 of everything before it. Files with magic `dpor-sigma-1` (one
//! run, no count) are the stash of older versions, still read.

use anyhow::Context;
use dpor_proto::messages::WireRun;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most checksum values (u64 each) a sidecar may hold to be kept inside the state
/// file rather than in a file of its own: 8,192 values (64 KiB), the σ of a level of up
/// to 2^12 coded blocks (ℓ ≤ 11) at ρ = 2, with the smaller levels a batch leaves
/// beside it. A batch of 512 writes leaves one new level of ℓ ≥ 9; 7 in 8 of them now
/// keep their checksums in the state file, which the batch saves anyway, instead of a
/// file of their own (fsync, rename, folder fsync, and a deletion with its discard once
/// the level is consumed: two of the owner's ≈ 6 flushes per batch, docs/PERFORMANCE.md
/// "tenth session"). The live levels of ℓ ≤ 11 bound what each save carries inline
/// (≲ 200 KiB); larger levels, which live long, keep files of their own.
pub(super) const INLINE_MAX_VALUES: usize = 8192;

/// The sidecars kept inside the state file: their bytes ([`encode`]) by name.
pub(super) type Inline = BTreeMap<String, Vec<u8>>;

/// Magic of the checksum sidecar file (one run; still read).
pub(super) const SIGMA_MAGIC: &[u8; 12] = b"dpor-sigma-1";
/// Magic of the checksum sidecar file holding several runs.
pub(super) const SIGMA_MAGIC_2: &[u8; 12] = b"dpor-sigma-2";

/// The checksums of some runs: (run, size × ρ canonical values).
pub(super) type RunSigmas = Vec<(WireRun, Vec<u64>)>;

/// The bytes of a sidecar holding `runs`, and its name (16 hex digits of its check).
pub(super) fn encode(runs: &[(WireRun, Vec<u64>)]) -> (Vec<u8>, String) {
    let mut buf = Vec::with_capacity(SIGMA_MAGIC_2.len() + 8 + runs.iter().map(|(_, v)| 20 + 8 * v.len()).sum::<usize>() + 32);
    buf.extend_from_slice(SIGMA_MAGIC_2);
    buf.extend_from_slice(&(runs.len() as u64).to_le_bytes());
    for (run, v) in runs {
        buf.extend_from_slice(&run.tag.to_le_bytes());
        buf.extend_from_slice(&run.built_at.to_le_bytes());
        buf.extend_from_slice(&(v.len() as u64).to_le_bytes());
        for x in v {
            buf.extend_from_slice(&x.to_le_bytes());
        }
    }
    let check = alloy_primitives::keccak256(&buf);
    buf.extend_from_slice(check.as_slice());
    (buf, name_of(check.as_slice()))
}

fn name_of(check: &[u8]) -> String {
    alloy_primitives::hex::encode(&check[..8])
}

/// The path of sidecar `name` beside the state file `state`.
pub(super) fn path(state: &Path, name: &str) -> PathBuf {
    PathBuf::from(format!("{}.sigma.{name}", state.display()))
}

/// Writes a sidecar holding `runs` beside `state`, durably, or, when it holds at most
/// [`INLINE_MAX_VALUES`] values, puts it into `inline` (durable with the next save of
/// the state, which must come before anything relies on it); returns its name.
/// Errors: the file cannot be written.
pub(super) fn write(state: &Path, runs: &[(WireRun, Vec<u64>)], inline: &mut Inline) -> anyhow::Result<String> {
    let (buf, name) = encode(runs);
    if runs.iter().map(|(_, v)| v.len()).sum::<usize>() <= INLINE_MAX_VALUES {
        inline.insert(name.clone(), buf);
    } else {
        super::write_durably(&path(state, &name), &buf)?;
    }
    Ok(name)
}

/// The blob of the state file that holds the sidecars `inline` (little-endian): per
/// sidecar its length (u64) and its bytes ([`encode`]); empty for none.
pub(super) fn encode_inline(inline: &Inline) -> Vec<u8> {
    let mut out = Vec::with_capacity(inline.values().map(|b| 8 + b.len()).sum());
    for b in inline.values() {
        out.extend_from_slice(&(b.len() as u64).to_le_bytes());
        out.extend_from_slice(b);
    }
    out
}

/// The sidecars in a state file's blob ([`encode_inline`]), each checked. Errors: a
/// damaged or truncated blob (`shown` names the state file).
pub(super) fn parse_inline(mut blob: &[u8], shown: &Path) -> anyhow::Result<Inline> {
    let bad = || anyhow::anyhow!("the checksums inside the owner state {} are damaged", shown.display());
    let mut out = Inline::new();
    while !blob.is_empty() {
        let len = blob.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes).ok_or_else(bad)?;
        let end = usize::try_from(len).ok().and_then(|l| l.checked_add(8)).filter(|e| *e <= blob.len() && *e >= 8 + 32).ok_or_else(bad)?;
        let buf = &blob[8..end];
        let name = name_of(&buf[buf.len() - 32..]);
        parse(buf, Some(&name), shown)?;
        out.insert(name, buf.to_vec());
        blob = &blob[end..];
    }
    Ok(out)
}

/// Parses a sidecar's bytes (either magic). `expect_name`, when given, must be the
/// name its check gives. Errors: a damaged or truncated file, or another name.
pub(super) fn parse(buf: &[u8], expect_name: Option<&str>, shown: &Path) -> anyhow::Result<RunSigmas> {
    let bad = || anyhow::anyhow!("the checksums file {} is damaged", shown.display());
    if buf.len() < SIGMA_MAGIC.len() + 32 {
        return Err(bad());
    }
    let (body, check) = buf.split_at(buf.len() - 32);
    if alloy_primitives::keccak256(body).as_slice() != check {
        return Err(bad());
    }
    if let Some(name) = expect_name {
        anyhow::ensure!(name_of(check) == name, "the checksums file {} holds other content than its name says", shown.display());
    }
    let u32_at = |o: usize| body.get(o..o + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
    let u64_at = |o: usize| body.get(o..o + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    let m = SIGMA_MAGIC.len();
    let (runs, mut at) = match &body[..m] {
        x if x == SIGMA_MAGIC => (1u64, m),
        x if x == SIGMA_MAGIC_2 => (u64_at(m).ok_or_else(bad)?, m + 8),
        _ => return Err(bad()),
    };
    let mut out = Vec::new();
    for _ in 0..runs {
        let run = WireRun { tag: u32_at(at).ok_or_else(bad)?, built_at: u64_at(at + 4).ok_or_else(bad)? };
        let count = usize::try_from(u64_at(at + 12).ok_or_else(bad)?).map_err(|_| bad())?;
        let head = at + 20;
        let end = count.checked_mul(8).and_then(|b| b.checked_add(head)).filter(|e| *e <= body.len()).ok_or_else(bad)?;
        let values = body[head..end].chunks_exact(8).map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect();
        out.push((run, values));
        at = end;
    }
    anyhow::ensure!(at == body.len(), "{}", bad());
    Ok(out)
}

/// Reads sidecar `name`: from `inline` (kept inside the state file), else the file
/// beside `state`. Errors: missing, damaged, or not the content its name says.
pub(super) fn read(state: &Path, name: &str, inline: &Inline) -> anyhow::Result<RunSigmas> {
    let p = path(state, name);
    if let Some(buf) = inline.get(name) {
        return parse(buf, Some(name), &p);
    }
    let buf = std::fs::read(&p).with_context(|| format!("cannot read the checksums file {}", p.display()))?;
    parse(&buf, Some(name), &p)
}

/// Deletes the sidecars beside `state` whose names `keep` does not hold (those of runs
/// the saved state no longer has, a stash nothing names). Best effort: a file that
/// cannot be listed or deleted stays, and is tried again at the next save.
pub(super) fn collect_garbage(state: &Path, keep: &[&str]) {
    for (name, p) in sidecars(state) {
        if !keep.contains(&name.as_str()) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The checksum sidecars beside the state file `state`: (name, path) of every
/// `<state>.sigma.<16 hex digits>` file (empty if the folder cannot be listed).
pub fn sidecars(state: &Path) -> Vec<(String, PathBuf)> {
    let (Some(dir), Some(file)) = (state.parent(), state.file_name().and_then(|f| f.to_str())) else { return Vec::new() };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let prefix = format!("{file}.sigma.");
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| {
            let rest = e.file_name().to_str()?.strip_prefix(&prefix)?.to_string();
            (rest.len() == 16 && rest.bytes().all(|b| b.is_ascii_hexdigit())).then(|| (rest, e.path()))
        })
        .collect()
}
