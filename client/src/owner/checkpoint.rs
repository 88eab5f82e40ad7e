//! A checkpoint (`dpor checkpoint`, and each shard's in dispersal): the owner settles
//! any interrupted request, checks the runs batches built (deferred checks), has the
//! provider co-sign the next digest and posts it on chain. While the deal on chain still
//! has the old N (an interrupted resize), the checkpoint is the resize's on-chain step.

use super::{batch, flows, recover, resize};
use crate::node_client::{NodeClient, OwnerAuth};
use crate::owner_state::OwnerState;
use crate::progress::Notes;
use crate::session::Session;
use alloy::signers::SignerSync;
use alloy_primitives::{Address, Bytes, B256};
use anyhow::{ensure, Context};
use dpor_proto::messages::WireDigest;

/// What a checkpoint did.
#[derive(Debug, Clone)]
pub enum Checkpointed {
    /// An interrupted resize was completed on chain (`resizeDeal`) instead.
    Resized {
        /// The deal.
        deal: u64,
        /// N before.
        from_blocks: u64,
        /// N after.
        to_blocks: u64,
        /// The digest version posted with the resize.
        version: u64,
        /// Its EIP-712 hash.
        digest_hash: B256,
    },
    /// A digest was posted.
    Posted {
        /// The deal.
        deal: u64,
        /// The digest's version.
        version: u64,
        /// Its EIP-712 hash.
        digest_hash: B256,
        /// t, writes so far.
        write_count: u64,
        /// C-rebuilds so far.
        rebuild_count: u64,
        /// Filled levels the digest names.
        levels: usize,
        /// The owner's account (first signature).
        owner: Address,
        /// The provider's account (second signature).
        provider: Address,
    },
}

/// Settles the owner's unfinished request with the node ([`recover::recover`]), each
/// thing it did a note (`dpor: recovered: …`).
///
/// # Errors
/// The node cannot be asked, or its answer fails the checks.
pub async fn settle(node: &NodeClient, auth: &OwnerAuth<'_>, state: &mut OwnerState, notes: &dyn Notes) -> anyhow::Result<()> {
    let done = recover::recover(node, auth, state).await.context("settling the previous, interrupted request with the node")?;
    for n in done {
        notes.note(&format!("dpor: recovered: {n}"));
    }
    Ok(())
}

/// Checkpoints the deal of `session.state_path`, saving the state after every step.
///
/// # Errors
/// No key, the file not uploaded, a node or chain failure, a run or the provider's
/// signature failing the checks.
pub async fn checkpoint(session: &Session, notes: &dyn Notes) -> anyhow::Result<Checkpointed> {
    let path = &session.state_path;
    let mut state = OwnerState::load(path)?;
    let key = session.key()?;
    let node = session.node_for_deal(state.deal).await?;
    let auth = OwnerAuth { key, chain_id: state.chain_id, market: state.market, deal: state.deal };
    settle(&node, &auth, &mut state, notes).await?;
    ensure!(state.uploaded, "upload the file first");
    let market = &session.market;
    if market.get_deal(state.deal).await?.num_blocks != state.num_blocks {
        // An interrupted `resize`: its on-chain step is this checkpoint.
        let chain = resize::resize_on_chain(market, &node, &auth, key, &mut state, None).await;
        state.save(path)?;
        let chain = chain?;
        return Ok(Checkpointed::Resized {
            deal: state.deal,
            from_blocks: chain.from_blocks,
            to_blocks: state.num_blocks,
            version: chain.version,
            digest_hash: chain.digest_hash,
        });
    }
    // Every run the digest references must be checked before the owner signs
    // it: those that batches built are checked now (deferred checks).
    let deferred = batch::verify_deferred(&node, &auth, &mut state).await;
    state.save(path)?;
    let deferred = deferred.context("checking the runs built by batches of writes since the last checkpoint")?;
    if !deferred.recomputed.is_empty() || !deferred.spot_checked.is_empty() {
        notes.note(&format!(
            "dpor: checked the batches' runs: recomputed {:?}, spot-checked {:?} ({} samples)",
            deferred.recomputed, deferred.spot_checked, deferred.samples
        ));
    }
    let onchain = market.get_deal(state.deal).await?;
    // Above any version the node co-signed: after a lost co-sign answer the node
    // has signed a version the owner never posted, and will not sign it again.
    let node_cosigned = node.status(state.deal).await?.cosigned_version.unwrap_or(0);
    let version = state.digest_version.max(onchain.digest_version).max(node_cosigned) + 1;
    let digest = flows::next_digest(&state, version);
    let hash = digest.digest_hash(state.chain_id, state.market);
    let owner_sig = key.sign_hash_sync(&hash).context("signing the digest")?.as_bytes().to_vec();
    let nonce = state.next_nonce();
    let cosigned = node.cosign(&auth, nonce, WireDigest::from(&digest)).await;
    state.save(path)?;
    let (provider_sig, provider) = cosigned?;
    let signer = resize::check_provider_signature(&provider_sig, provider, hash, onchain.provider, "digest")?;
    match market.post_digest(&digest, Bytes::from(owner_sig), Bytes::from(provider_sig)).await {
        Ok(_) => {}
        // The node may post a digest it co-signed itself (with the owner's
        // signature the Cosign carried, issue 22), before ours is estimated
        // (StaleVersion) or mined (our transaction then reverts on chain): this
        // very digest on chain is the checkpoint done, whoever posted it.
        Err(e) => {
            if !market.digest_record(state.deal, version).await.is_ok_and(|r| r.digest_hash == hash) {
                return Err(e.into());
            }
        }
    }
    state.digest_version = version;
    state.save(path)?;
    Ok(Checkpointed::Posted {
        deal: state.deal,
        version,
        digest_hash: hash,
        write_count: state.write_count,
        rebuild_count: state.rebuild_count,
        levels: digest.levelRoots.len(),
        owner: key.address(),
        provider: signer,
    })
}
