//! Digests and pins: co-signing checks a digest against the current state; the
//! co-signed, posted and disputed digests pin their runs against garbage collection.
//! Also the owner's σ̃ of run positions.

use super::error::{Result, StoreError};
use super::meta::{CosignKind, CosignRecord, DealMeta, LastAnswer, MAX_UNPOSTED_COSIGNS};
use super::{lock, wlock, Store};
use alloy_primitives::U256;
use dpor_core::digest::Digest;
use dpor_core::state::RunId;

/// Why `d` does not describe `m`'s current state, if it does not.
fn mismatch(m: &DealMeta, d: &Digest) -> Option<String> {
    if let Err(e) = d.validate() {
        return Some(e.to_string());
    }
    let root_c = m.c.map(|(_, r)| r).unwrap_or_default();
    let levels: Vec<_> = m.levels.iter().map(|(_, _, r)| *r).collect();
    let checks = [
        (d.dealId == U256::from(m.params.deal), "dealId"),
        (d.numBlocks == m.num_blocks(), "numBlocks"),
        (d.writeCount == m.write_count, "writeCount"),
        (d.rebuildCount == m.rebuild_count, "rebuildCount"),
        (d.rootU == m.root_u, "rootU"),
        (d.rootC == root_c, "rootC"),
        (d.levelRoots == levels, "levelRoots"),
    ];
    checks.iter().find(|(ok, _)| !ok).map(|(_, what)| format!("{what} differs from the current state"))
}

impl Store {
    /// What became of the owner request with `nonce` (crash recovery): the last
    /// accepted nonce and, if `nonce` was the last write or upload finish, its answer.
    ///
    /// Errors: [`StoreError::UnknownDeal`].
    pub fn outcome(&self, deal: u64, nonce: u64) -> Result<(u64, Option<LastAnswer>)> {
        self.with_state(deal, |st| {
            let last = st.meta.last_nonce.unwrap_or(0);
            let answer = st.meta.last_answer.as_ref().filter(|(n, _)| *n == nonce).map(|(_, a)| a.clone());
            Ok((last, answer))
        })
    }

    /// Runs `f` on a copy of the deal's record under its mutation lock; if `f`
    /// returns a new record, commits it (with `batch`), installs it and collects
    /// garbage.
    fn update_meta(&self, deal: u64, f: impl FnOnce(&DealMeta, &mut sled::Batch) -> Result<Option<DealMeta>>) -> Result<()> {
        let entry = self.deal(deal)?;
        let _op = lock(&entry.op);
        let mut g = wlock(&entry.state);
        let st = g.as_mut().ok_or(StoreError::UnknownDeal(deal))?;
        let mut batch = sled::Batch::default();
        let Some(new) = f(&st.meta, &mut batch)? else {
            return Ok(());
        };
        self.commit(&new, Some(&st.meta), batch)?;
        st.meta = new;
        self.gc(&st.meta, &st.dir, false);
        Ok(())
    }

    /// Stores the owner's σ̃ of positions `start..start+len` of `run`, a run of the
    /// current state.
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::Replay`],
    /// [`StoreError::UnknownRun`] (not a current run), [`StoreError::Range`],
    /// [`StoreError::Sled`].
    pub fn store_sealed(&self, deal: u64, nonce: u64, run: RunId, start: u64, sealed: &[[u8; 32]]) -> Result<()> {
        self.update_meta(deal, |m, batch| {
            m.check_nonce(nonce)?;
            let size = m
                .current_runs()
                .into_iter()
                .find(|(id, _, _)| *id == run)
                .map(|(_, size, _)| size)
                .ok_or(StoreError::UnknownRun { deal, run })?;
            if start.checked_add(sealed.len() as u64).is_none_or(|end| end > size) {
                return Err(StoreError::Range(format!("{start}+{} is past {size}", sealed.len())));
            }
            self.ensure_space(64u64.saturating_mul(sealed.len() as u64))?;
            for (k, v) in super::sealed::entries(&self.db, deal, run, start, sealed)? {
                batch.insert(&k[..], v);
            }
            let mut new = m.clone();
            new.last_nonce = Some(nonce);
            // A later owner request: the owner has the last write's answer.
            new.previous.clear();
            Ok(Some(new))
        })
    }

    /// Checks that `digest` describes the current state exactly (dealId, N, t,
    /// rebuildCount, rootU, rootC, level roots) with a version above the last
    /// co-signed one; on success it becomes the co-signed pin (persisted), with no
    /// signatures kept. [`Store::cosign`] is what the node uses; this is the same
    /// check and pin for tests and tools that sign nothing.
    ///
    /// Errors: as [`Store::cosign`].
    pub fn check_cosign(&self, deal: u64, digest: &Digest) -> Result<()> {
        self.cosign(deal, digest, CosignKind::Digest, Vec::new(), || Ok(Vec::new())).map(|_| ())
    }

    /// Co-signs `digest` (issue 22): checks that it describes the current state
    /// exactly (dealId, N, t, rebuildCount, rootU, rootC, level roots) with a version
    /// above the last co-signed one, that fewer than [`MAX_UNPOSTED_COSIGNS`] co-signed
    /// digests wait to be posted, then calls `sign` for the node's signature and
    /// commits, in one durable record, the digest as the latest co-signed one and as a
    /// [`CosignRecord`] (with `owner_sig` and the node's signature) that pins its runs
    /// until a digest of at least its version is posted ([`Store::set_posted`]). The
    /// signature is returned only once that record is on disk, so after a crash the
    /// node still keeps the runs of every digest whose signature left it. `owner_sig`
    /// is the owner's signature over the same thing (checked by the caller; empty if
    /// the request carries none, and then the node cannot post it itself).
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::Phase`] while uploading,
    /// [`StoreError::StaleVersion`], [`StoreError::DigestMismatch`],
    /// [`StoreError::Unposted`] (too many co-signed digests not posted),
    /// [`StoreError::Signing`] (what `sign` returned), [`StoreError::Sled`].
    pub fn cosign(
        &self,
        deal: u64,
        digest: &Digest,
        kind: CosignKind,
        owner_sig: Vec<u8>,
        sign: impl FnOnce() -> std::result::Result<Vec<u8>, String>,
    ) -> Result<Vec<u8>> {
        // The digest names the runs' roots: deferred builds are finished first.
        self.settle(deal)?;
        let mut signature = None;
        self.update_meta(deal, |m, _| {
            cosign_checks(deal, m, digest)?;
            let provider_sig = sign().map_err(StoreError::Signing)?;
            let mut new = m.clone();
            new.cosigned = Some(digest.clone());
            new.unposted.push(CosignRecord { digest: digest.clone(), kind, owner_sig, provider_sig: provider_sig.clone() });
            // The owner co-signs the current state: it has the last write's answer.
            new.previous.clear();
            signature = Some(provider_sig);
            Ok(Some(new))
        })?;
        signature.ok_or_else(|| StoreError::Corrupt(format!("deal {deal}: co-signature not recorded")))
    }

    /// The checks of [`Store::cosign`], committing nothing (a `CosignResize` makes
    /// them before it locks collateral on chain).
    ///
    /// Errors: as [`Store::cosign`].
    pub fn precheck_cosign(&self, deal: u64, digest: &Digest) -> Result<()> {
        self.settle(deal)?;
        self.with_state(deal, |st| cosign_checks(deal, &st.meta, digest))
    }

    /// The co-signed digests of `deal` not posted yet, ascending version (see
    /// [`CosignRecord`]).
    ///
    /// Errors: [`StoreError::UnknownDeal`].
    pub fn unposted(&self, deal: u64) -> Result<Vec<CosignRecord>> {
        self.with_state(deal, |st| Ok(st.meta.unposted.clone()))
    }

    /// What the node should post itself (issue 22): the newest co-signed digest of
    /// `deal` that it can post ([`CosignRecord::postable`]), if an older co-signed
    /// digest is waiting too (posting it retires that one: `postDigest` then refuses
    /// every lower version, so the older state's runs can go). `None` while at most one
    /// co-signed digest waits: the owner posts it (`dpor checkpoint` does, right after
    /// co-signing).
    ///
    /// Errors: [`StoreError::UnknownDeal`].
    pub fn cosigned_to_post(&self, deal: u64) -> Result<Option<CosignRecord>> {
        self.with_state(deal, |st| {
            let u = &st.meta.unposted;
            Ok(u.iter().rposition(CosignRecord::postable).filter(|&i| i > 0).and_then(|i| u.get(i)).cloned())
        })
    }

    /// Records the latest digest posted on chain (pinning its runs) and releases the
    /// co-signed digests of versions up to its own (the market refuses them now:
    /// `StaleVersion`). A digest with a version not above the recorded one is ignored.
    ///
    /// Errors: [`StoreError::UnknownDeal`], [`StoreError::DigestMismatch`] if it names
    /// another deal or has a bad shape.
    pub fn set_posted(&self, deal: u64, digest: &Digest) -> Result<()> {
        self.update_meta(deal, |m, _| {
            check_shape(deal, digest)?;
            if m.posted.as_ref().is_some_and(|p| digest.version <= p.version) {
                return Ok(None);
            }
            let mut new = m.clone();
            new.posted = Some(digest.clone());
            new.unposted.retain(|c| c.digest.version > digest.version);
            Ok(Some(new))
        })
    }

    /// Pins the digest of open dispute `dispute` (replacing an earlier pin of it).
    ///
    /// Errors: as [`Store::set_posted`].
    pub fn pin_dispute(&self, deal: u64, dispute: u64, digest: &Digest) -> Result<()> {
        self.update_meta(deal, |m, _| {
            check_shape(deal, digest)?;
            let mut new = m.clone();
            new.disputes.retain(|(id, _)| *id != dispute);
            new.disputes.push((dispute, digest.clone()));
            new.disputes.sort_by_key(|(id, _)| *id);
            Ok(Some(new))
        })
    }

    /// Drops the pin of dispute `dispute` (a no-op if there is none).
    ///
    /// Errors: [`StoreError::UnknownDeal`].
    pub fn unpin_dispute(&self, deal: u64, dispute: u64) -> Result<()> {
        self.update_meta(deal, |m, _| {
            if !m.disputes.iter().any(|(id, _)| *id == dispute) {
                return Ok(None);
            }
            let mut new = m.clone();
            new.disputes.retain(|(id, _)| *id != dispute);
            Ok(Some(new))
        })
    }

    /// Pins `digest`, the digest in force at the start of epoch `epoch` of `deal`
    /// (docs/CONTRACTS.md §4: an epoch's proof must use it even after newer digests),
    /// until [`Store::unpin_epoch`] or [`Store::unpin_epochs_before`]. Stored in the
    /// dispute pin list under the key `EPOCH_PIN | epoch` (dispute ids stay below 2^63),
    /// so the metadata format is unchanged.
    ///
    /// Errors: as [`Store::set_posted`].
    pub fn pin_epoch(&self, deal: u64, epoch: u64, digest: &Digest) -> Result<()> {
        self.pin_dispute(deal, EPOCH_PIN | (epoch & !EPOCH_PIN), digest)
    }

    /// Drops the pin of epoch `epoch` (settled). A no-op if there is none.
    ///
    /// Errors: [`StoreError::UnknownDeal`].
    pub fn unpin_epoch(&self, deal: u64, epoch: u64) -> Result<()> {
        self.unpin_dispute(deal, EPOCH_PIN | (epoch & !EPOCH_PIN))
    }

    /// Drops the pins of every epoch below `epoch` (their windows are over).
    ///
    /// Errors: [`StoreError::UnknownDeal`].
    pub fn unpin_epochs_before(&self, deal: u64, epoch: u64) -> Result<()> {
        let stale = |id: u64| id & EPOCH_PIN != 0 && (id & !EPOCH_PIN) < epoch;
        self.update_meta(deal, |m, _| {
            if !m.disputes.iter().any(|(id, _)| stale(*id)) {
                return Ok(None);
            }
            let mut new = m.clone();
            new.disputes.retain(|(id, _)| !stale(*id));
            Ok(Some(new))
        })
    }
}

/// Whether `m` may co-sign `digest`: live, the digest describes the current state,
/// its version is above the last co-signed one, and fewer than
/// [`MAX_UNPOSTED_COSIGNS`] co-signed digests wait to be posted.
fn cosign_checks(deal: u64, m: &DealMeta, digest: &Digest) -> Result<()> {
    if m.c.is_none() {
        return Err(StoreError::Phase(format!("deal {deal} is still uploading")));
    }
    if let Some(why) = mismatch(m, digest) {
        return Err(StoreError::DigestMismatch(why));
    }
    if let Some(last) = &m.cosigned {
        if digest.version <= last.version {
            return Err(StoreError::StaleVersion { got: digest.version, last: last.version });
        }
    }
    if m.unposted.len() >= MAX_UNPOSTED_COSIGNS {
        return Err(StoreError::Unposted { deal, versions: m.unposted.iter().map(|c| c.digest.version).collect() });
    }
    Ok(())
}

/// The bit that marks an epoch pin in the pin list shared with disputes
/// ([`Store::pin_epoch`]).
pub const EPOCH_PIN: u64 = 1 << 63;

fn check_shape(deal: u64, d: &Digest) -> Result<()> {
    d.validate().map_err(|e| StoreError::DigestMismatch(e.to_string()))?;
    if d.dealId != U256::from(deal) {
        return Err(StoreError::DigestMismatch(format!("digest is for deal {}, not {deal}", d.dealId)));
    }
    Ok(())
}
