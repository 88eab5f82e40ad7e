//! Resize (App. A.3 of the paper; docs/SCHEME.md §10.5, docs/CONTRACTS.md
//! "Resizing"): the owner's side.
//!
//! 1. [`resize`]: the owner fetches U's leaves (checked against its rootU), computes
//!    the new rootU itself (leaves kept up to N', new ones for zero blocks with σ̃ =
//!    [`ZERO_BLOCK_U`]) and the checksums of the new C (the C-rebuild run on checksums,
//!    for N'), records the intent durably, and asks the node to resize.
//! 2. [`finish_resize`]: the node's answer must give that rootU and name `C@r'·N'`;
//!    C is spot-checked (λ positions) against the predicted checksums, then the state
//!    moves to N' and C's σ̃ go to the node, exactly as after a write's C-rebuild.
//! 3. [`resize_on_chain`]: both parties sign the EIP-712 `Resize` (the first digest of
//!    the new size, the new price per epoch and collateral) and the owner submits
//!    `resizeDeal`, approving any escrow increase first. `dpor checkpoint` runs this
//!    step instead of `postDigest` while the deal on chain still has the old N (a
//!    resize whose on-chain step was interrupted).

use super::flows::{open_u, Misbehaved, reject, spot_check_run, store_pending_sealed, verified_u_leaves};
use super::machine::{self, Request};
pub use super::resize_terms::ResizeTerms;
use crate::node_client::{NodeClient, OwnerAuth, Written};
use crate::owner_state::{OwnerState, Pending, RunEntry, SIGMA_WIDTH};
use alloy::signers::local::PrivateKeySigner;
use alloy::signers::SignerSync;
use alloy_primitives::{Address, Bytes, Signature, B256, U256};
use anyhow::{bail, ensure, Context};
use dpor_chain::Market;
use dpor_core::block::MAX_LOG_BLOCKS;
use dpor_core::checksum::{ZERO_BLOCK_U, RHO};
use dpor_core::digest::Resize;
use dpor_core::merkle::{self, MerkleTree};
use dpor_core::state::{resized_rebuild_count, RunId};
use dpor_core::{code, RunTag};
use dpor_proto::messages::{Response, WireDigest, WireRun, WireStep};

/// What a resize did on the node.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ResizeReport {
    /// N before.
    pub from_blocks: u64,
    /// N' after.
    pub to_blocks: u64,
    /// The new C.
    pub run: String,
    /// Its root.
    pub run_root: B256,
    /// The new rootU.
    pub root_u: B256,
    /// Positions of C spot-checked.
    pub spot_checked: usize,
}

/// Step 1 and 2 (see the module docs): resizes the node's copy to `num_blocks` blocks
/// and verifies it. The caller saves the state.
///
/// Errors: an unfinished request the node cannot settle, N' not a power of two in
/// 1..=2^31 or equal to N, the node refusing, a node answer that fails the checks
/// (the intent is then marked rejected and the owner stays on its previous state).
pub async fn resize(node: &NodeClient, auth: &OwnerAuth<'_>, state: &mut OwnerState, num_blocks: u64) -> anyhow::Result<ResizeReport> {
    machine::ready(node, state).await?;
    ensure!(state.uploaded, "upload the file first");
    if let Some(why) = &state.deferred_failure {
        bail!("the node failed a deferred check earlier ({why}); the owner signs nothing more for this deal");
    }
    ensure!(
        num_blocks.is_power_of_two() && num_blocks <= 1u64 << MAX_LOG_BLOCKS && num_blocks != state.num_blocks,
        "cannot resize from N = {} to {num_blocks}: N' must be another power of two in 1..=2^{MAX_LOG_BLOCKS}",
        state.num_blocks
    );
    let format = state.format()?;
    let keys = state.keys()?;
    let n = state.num_blocks;
    let keep = n.min(num_blocks) as usize;
    // U's leaves as the node holds them, checked against the owner's rootU.
    let mut parts = verified_u_leaves(node, state).await?;
    parts.truncate(keep);
    let zero_root = merkle::block_root(&vec![0u8; format.block_bytes()]);
    let mut leaves = Vec::with_capacity(num_blocks as usize);
    let mut sigma = Vec::with_capacity(num_blocks as usize * RHO);
    for (i, (root, s)) in parts.iter().enumerate() {
        leaves.push(merkle::u_leaf(i as u64, root, &s.0));
        sigma.extend_from_slice(&open_u(&keys, &format, i as u64, &s.0)?);
    }
    for i in keep as u64..num_blocks {
        leaves.push(merkle::u_leaf(i, &zero_root, &ZERO_BLOCK_U));
        sigma.extend_from_slice(&open_u(&keys, &format, i, &ZERO_BLOCK_U)?);
    }
    let new_root_u = MerkleTree::new(leaves).context("U tree")?.root();
    let new_log = num_blocks.trailing_zeros();
    let rebuilds = resized_rebuild_count(state.rebuild_count, state.log_blocks(), state.write_count, new_log)
        .context("the rebuild count overflows")?;
    let expected_run = RunId { tag: RunTag::C, built_at: rebuilds << new_log };
    let expected = code::c_rebuild(&sigma, new_log, SIGMA_WIDTH)?;
    drop(sigma);

    let nonce = state.next_nonce();
    let run = WireRun::from(expected_run);
    state.stash_sigma(run, &expected)?;
    machine::intend(state, Pending::Resize { nonce, num_blocks, new_root_u, run, rejected: None })?;
    machine::run(node, auth, state, &ResizeRequest { nonce, num_blocks }).await
}

/// Step 2 (see the module docs): checks the node's answer to a [`Pending::Resize`]
/// (as it arrived, or as the node reported it after a crash), commits the owner's new
/// state and stores C's σ̃ on the node. A failed check marks the intent rejected.
pub(crate) async fn finish_resize(node: &NodeClient, auth: &OwnerAuth<'_>, state: &mut OwnerState, written: Written) -> anyhow::Result<ResizeReport> {
    let Some(Pending::Resize { num_blocks, new_root_u, run, .. }) = state.pending.clone() else {
        bail!("no resize is pending");
    };
    let format = state.format()?;
    let keys = state.keys()?;
    let expected_run = RunId::from(run);
    let expected = state.stashed_sigma(run)?;
    let size = 2 * num_blocks;
    ensure!(expected.len() as u64 == size * RHO as u64, "the stashed checksums of {expected_run} have the wrong length");
    let verdict = async {
        if written.root_u != new_root_u {
            return Err(Misbehaved(format!("the node's new rootU {} differs from the owner's {new_root_u}", written.root_u)).into());
        }
        if RunId::from(written.run) != expected_run || written.step != WireStep::CRebuild {
            return Err(Misbehaved(format!(
                "the node built run {} ({:?}), expected {expected_run} (C-rebuild)",
                RunId::from(written.run),
                written.step
            ))
            .into());
        }
        spot_check_run(node, state.deal, &keys, &format, written.run, written.run_root, size, &expected, state.lambda).await
    }
    .await;
    let checked = match verdict {
        Ok(n) => n,
        Err(e) => return Err(reject(state, e)),
    };
    let from = state.num_blocks;
    let new_log = num_blocks.trailing_zeros();
    state.rebuild_count = expected_run.built_at >> new_log;
    state.num_blocks = num_blocks;
    state.write_count = 0;
    state.root_u = new_root_u;
    state.levels = vec![None; new_log as usize];
    state.c = Some(RunEntry { run: written.run, root: written.run_root, sigma: None, unchecked: false, sigma_file: None });
    state.c_snapshot = None;
    state.recent.clear();
    state.recent_disk = None;
    state.file_bytes = state.file_bytes.min(num_blocks.saturating_mul(u64::from(state.block_bytes)));
    state.pending = Some(Pending::StoreSealed { run: written.run, next: 0, more: vec![] });
    // The emptied block cache first: the new numbering must never meet the old blocks
    // (a crash between leaves the old state with an empty cache, which only costs checks).
    state.save_recent()?;
    state.persist()?;
    store_pending_sealed(node, auth, state, &keys).await?;
    Ok(ResizeReport {
        from_blocks: from,
        to_blocks: num_blocks,
        run: expected_run.to_string(),
        run_root: written.run_root,
        root_u: new_root_u,
        spot_checked: checked,
    })
}

/// A resize ([`Pending::Resize`]) as the owner's state machine drives it ([`machine`]):
/// settled by [`finish_resize`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResizeRequest {
    /// Its nonce.
    pub nonce: u64,
    /// N', blocks.
    pub num_blocks: u64,
}

impl ResizeRequest {
    /// The request a saved intent holds, if it is a resize.
    pub(crate) fn of(p: &Pending) -> Option<Self> {
        match p {
            Pending::Resize { nonce, num_blocks, .. } => Some(Self { nonce: *nonce, num_blocks: *num_blocks }),
            _ => None,
        }
    }
}

impl Request for ResizeRequest {
    type Answer = Written;
    type Report = ResizeReport;

    fn what(&self) -> String {
        format!("resize to {} blocks", self.num_blocks)
    }

    fn nonce(&self) -> u64 {
        self.nonce
    }

    async fn send(&self, node: &NodeClient, auth: &OwnerAuth<'_>, _state: &OwnerState) -> anyhow::Result<Written> {
        node.resize(auth, self.nonce, self.num_blocks).await
    }

    fn applied(&self, answer: Response) -> anyhow::Result<Written> {
        Written::from_response(&format!("the resize with nonce {}", self.nonce), answer)
    }

    async fn settle(
        &self,
        node: &NodeClient,
        auth: &OwnerAuth<'_>,
        state: &mut OwnerState,
        answer: Written,
    ) -> anyhow::Result<ResizeReport> {
        finish_resize(node, auth, state, answer).await
    }

    fn settled_note(&self, r: &ResizeReport, resent: bool) -> String {
        format!(
            "the interrupted resize to {} blocks (nonce {}) {}, verified: new C {}, spot-checked {} positions",
            self.num_blocks,
            self.nonce,
            machine::how(resent),
            r.run,
            r.spot_checked
        )
    }
}

/// Checks that `signature` (65 bytes, from a node claiming to be `claimed`) over `hash`
/// is the deal's provider's (`expected`); returns the signer. `what` names the signed
/// thing in the error.
pub fn check_provider_signature(signature: &[u8], claimed: Address, hash: B256, expected: Address, what: &str) -> anyhow::Result<Address> {
    let sig = Signature::try_from(signature).context("the provider's signature is malformed")?;
    let signer = sig.recover_address_from_prehash(&hash).context("the provider's signature does not recover")?;
    ensure!(signer == expected && claimed == expected, "the {what} was signed by {signer}, not the deal's provider {expected}");
    Ok(signer)
}

/// What the on-chain step did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ChainResize {
    /// The digest version posted with the resize.
    pub version: u64,
    /// Its hash.
    pub digest_hash: B256,
    /// N on chain before.
    pub from_blocks: u64,
    /// The terms.
    pub terms: ResizeTerms,
}

/// Step 3 (see the module docs): signs the `Resize` of the owner's current state with
/// `terms` (default: the terms kept for N' when the resize was asked,
/// [`super::resize_terms::load`], else the deal's per-block terms scaled to N'), gets
/// the provider's signature from the node, approves any escrow increase and submits
/// `resizeDeal`; the kept terms are then forgotten. The caller saves the state (its
/// digest version moves).
///
/// Errors: the deal on chain already at N' (then post a digest instead), the node
/// refusing the terms, a signature not from the deal's provider, the transaction
/// reverting.
pub async fn resize_on_chain(
    market: &Market,
    node: &NodeClient,
    auth: &OwnerAuth<'_>,
    key: &PrivateKeySigner,
    state: &mut OwnerState,
    terms: Option<ResizeTerms>,
) -> anyhow::Result<ChainResize> {
    let onchain = market.get_deal(state.deal).await?;
    ensure!(
        onchain.num_blocks != state.num_blocks,
        "deal {} already has N = {} on chain: nothing to resize (run `checkpoint`)",
        state.deal,
        onchain.num_blocks
    );
    let kept = match (&terms, &state.path) {
        (None, Some(p)) => super::resize_terms::load(p, state.num_blocks)?,
        _ => None,
    };
    let terms = terms.or(kept).unwrap_or_else(|| {
        ResizeTerms::scaled(onchain.price_per_epoch, onchain.collateral, onchain.num_blocks, state.num_blocks)
    });
    let node_cosigned = node.status(state.deal).await?.cosigned_version.unwrap_or(0);
    let version = state.digest_version.max(onchain.digest_version).max(node_cosigned) + 1;
    let digest = super::flows::next_digest(state, version);
    let resize = Resize { digest: digest.clone(), pricePerEpoch: terms.price_per_epoch, collateral: terms.collateral };
    let hash = resize.signing_hash(state.chain_id, state.market);
    let owner_sig = key.sign_hash_sync(&hash).context("signing the resize")?.as_bytes().to_vec();
    let nonce = state.next_nonce();
    let cosigned = node.cosign_resize(auth, nonce, WireDigest::from(&digest), terms.price_per_epoch, terms.collateral).await;
    state.persist()?;
    let (provider_sig, provider) = cosigned?;
    check_provider_signature(&provider_sig, provider, hash, onchain.provider, "resize")?;
    // The escrow for the remaining epochs at the new price is at most price × term.
    let most = U256::from(terms.price_per_epoch).saturating_mul(U256::from(onchain.num_epochs));
    let more = most.saturating_sub(U256::from(onchain.escrow));
    if more > U256::ZERO {
        market.ensure_allowance(more).await.context("approving the escrow increase")?;
    }
    let digest_hash = market
        .resize_deal(&digest, terms.price_per_epoch, terms.collateral, Bytes::from(owner_sig), Bytes::from(provider_sig))
        .await?;
    state.digest_version = version;
    if let Some(p) = &state.path {
        // Kept terms are only ever used for a resize not yet on chain: a leftover is harmless.
        if let Err(e) = super::resize_terms::clear(p) {
            tracing::warn!("{e:#}");
        }
    }
    Ok(ChainResize { version, digest_hash, from_blocks: onchain.num_blocks, terms })
}
