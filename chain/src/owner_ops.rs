//! Calls a data owner makes: opening, cancelling and closing deals, posting
//! dual-signed digests (ENCODING.md §5).

use crate::bindings::DporMarket;
use crate::client::{to_u64, Market};
use crate::convert::to_chain_digest;
use crate::error::ChainError;
use crate::types::{DealInfo, DigestInForce, DigestRecord};
use alloy_primitives::{Address, Bytes, B256, U256};
use dpor_core::digest::Digest;

impl Market {
    /// Opens a deal with `provider`, escrowing `price_per_block_epoch · num_blocks ·
    /// num_epochs` wei from the signer (approve first). `num_blocks` N is a power of two,
    /// `block_size` β in bytes, `lambda` λ audit samples per run, `samples_per_epoch` K
    /// whole-block samples per epoch proof, `num_epochs` the term;
    /// `min_collateral_per_block` is the least collateral per block (wei) the owner
    /// accepts (the provider's rate at acceptance must be at least this, issue 9
    /// finding 8). Returns the deal id. Errors: `NotRegistered`, `PriceBelowAsk`,
    /// `CollateralBelowMin`, `NumBlocksNotPowerOfTwo`, `InvalidParameter`, ERC-20 errors.
    #[allow(clippy::too_many_arguments)]
    pub async fn open_deal(
        &self,
        provider: Address,
        num_blocks: u64,
        block_size: u32,
        lambda: u16,
        samples_per_epoch: u8,
        num_epochs: u32,
        price_per_block_epoch: u128,
        min_collateral_per_block: u128,
    ) -> Result<u64, ChainError> {
        let call = self.market.openDeal(
            provider,
            num_blocks,
            block_size,
            lambda,
            samples_per_epoch,
            num_epochs,
            price_per_block_epoch,
            min_collateral_per_block,
        );
        let r = self.send("openDeal", call).await?;
        let ev = r
            .decoded_log::<DporMarket::DealOpened>()
            .ok_or(ChainError::MissingEvent { method: "openDeal", event: "DealOpened" })?;
        to_u64(ev.data.dealId)
    }

    /// Posts `digest` with the owner's and the provider's 65-byte signatures over its
    /// EIP-712 hash ([`crate::sign_digest`]). Anyone may relay it. Returns the digest
    /// hash. Errors: `WrongDealState`, `StaleVersion`, `WrongNumBlocks`,
    /// `WriteCountTooLarge`, `LevelRootsMismatch`, `BadOwnerSignature`,
    /// `BadProviderSignature`.
    pub async fn post_digest(&self, digest: &Digest, owner_sig: Bytes, provider_sig: Bytes) -> Result<B256, ChainError> {
        let r = self.send("postDigest", self.market.postDigest(to_chain_digest(digest), owner_sig, provider_sig)).await?;
        let ev = r
            .decoded_log::<DporMarket::DigestPosted>()
            .ok_or(ChainError::MissingEvent { method: "postDigest", event: "DigestPosted" })?;
        Ok(ev.data.digestHash)
    }

    /// Resizes a deal (App. A.3; docs/CONTRACTS.md, "Resizing"): `digest` (the first
    /// digest of the new size: N', t = 0, H empty) becomes the posted digest, the
    /// deal's price per epoch becomes `price_per_epoch` and its collateral
    /// `collateral` (wei), with both parties' 65-byte signatures over the EIP-712
    /// `Resize` ([`dpor_core::digest::Resize::signing_hash`]). The escrow difference
    /// is pulled from the owner (approve first) or credited to it; the collateral
    /// difference likewise for the provider. Anyone may relay. Returns the digest hash.
    /// Errors: `WrongDealState`, `StaleVersion`, `NumBlocksNotPowerOfTwo`,
    /// `BadOwnerSignature`, `BadProviderSignature`, `CapacityExceeded`, and the
    /// contract's resize errors (open disputes, exit requested).
    pub async fn resize_deal(
        &self,
        digest: &Digest,
        price_per_epoch: u128,
        collateral: u128,
        owner_sig: Bytes,
        provider_sig: Bytes,
    ) -> Result<B256, ChainError> {
        let call = self.market.resizeDeal(to_chain_digest(digest), price_per_epoch, collateral, owner_sig, provider_sig);
        let r = self.send("resizeDeal", call).await?;
        let ev = r
            .decoded_log::<DporMarket::DigestPosted>()
            .ok_or(ChainError::MissingEvent { method: "resizeDeal", event: "DigestPosted" })?;
        Ok(ev.data.digestHash)
    }

    /// The EIP-712 signing hash the contract computes for a resize (`resizeHash`
    /// view); equal to [`dpor_core::digest::Resize::signing_hash`].
    pub async fn resize_hash(&self, digest: &Digest, price_per_epoch: u128, collateral: u128) -> Result<B256, ChainError> {
        self.view("resizeHash", self.market.resizeHash(to_chain_digest(digest), price_per_epoch, collateral)).await
    }

    /// The EIP-712 hash the contract computes for `digest` (`digestHash` view); equal
    /// to [`Digest::digest_hash`]`(chain_id, market)`.
    pub async fn digest_hash(&self, digest: &Digest) -> Result<B256, ChainError> {
        self.view("digestHash", self.market.digestHash(to_chain_digest(digest))).await
    }

    /// Deal `deal_id` (state [`crate::DealState::None`] if unknown).
    pub async fn get_deal(&self, deal_id: u64) -> Result<DealInfo, ChainError> {
        let d = self.view("getDeal", self.market.getDeal(U256::from(deal_id))).await?;
        Ok(DealInfo::from_abi(deal_id, &d))
    }

    /// Number of deals opened (ids are 1..=count).
    pub async fn deal_count(&self) -> Result<u64, ChainError> {
        to_u64(self.view("dealCount", self.market.dealCount()).await?)
    }

    /// Cancels an Open deal (owner only); the escrow is sent back. Errors:
    /// `NotDealOwner`, `WrongDealState`.
    pub async fn cancel_deal(&self, deal_id: u64) -> Result<B256, ChainError> {
        Ok(self.send("cancelDeal", self.market.cancelDeal(U256::from(deal_id))).await?.transaction_hash)
    }

    /// Closes an Active deal once disputes are over (last deadline + `graceSeconds`;
    /// anyone): unsettled epochs that had a digest in force are faulted (slashed to the
    /// owner), the escrow left goes to the owner, the collateral left to the provider
    /// (credited; pull with [`Market::withdraw`]). Errors: `DealNotOver`,
    /// `DisputesOpen`, `WrongDealState`.
    pub async fn close_deal(&self, deal_id: u64) -> Result<B256, ChainError> {
        Ok(self.send("closeDeal", self.market.closeDeal(U256::from(deal_id))).await?.transaction_hash)
    }

    /// Asks to end Active deal `deal_id` early (owner or provider): the term becomes the
    /// current epoch plus `exitNoticeEpochs` (never longer than it was). Returns the new
    /// number of epochs. Errors: `NotDealParty`, `WrongDealState`.
    pub async fn request_exit(&self, deal_id: u64) -> Result<u32, ChainError> {
        let r = self.send("requestExit", self.market.requestExit(U256::from(deal_id))).await?;
        let ev = r
            .decoded_log::<DporMarket::ExitRequested>()
            .ok_or(ChainError::MissingEvent { method: "requestExit", event: "ExitRequested" })?;
        Ok(ev.data.numEpochs)
    }

    /// Ends Active deal `deal_id` with no digest once `uploadSeconds` have passed since
    /// acceptance (owner or provider): escrow back to the owner, collateral to the
    /// provider, no fault. Errors: `NotDealParty`, `DigestExists`, `UploadNotOver`,
    /// `WrongDealState`.
    pub async fn exit_before_upload(&self, deal_id: u64) -> Result<B256, ChainError> {
        Ok(self.send("exitBeforeUpload", self.market.exitBeforeUpload(U256::from(deal_id))).await?.transaction_hash)
    }

    /// The record of digest `version` of `deal_id` (`getDigestRecord`; zero hash if unknown).
    pub async fn digest_record(&self, deal_id: u64, version: u64) -> Result<DigestRecord, ChainError> {
        let r = self.view("getDigestRecord", self.market.getDigestRecord(U256::from(deal_id), version)).await?;
        Ok(DigestRecord {
            digest_hash: r.digestHash,
            posted_at: r.postedAt,
            write_count: r.writeCount,
            next_version: r.nextVersion,
            prev_version: r.prevVersion,
            num_blocks: r.numBlocks,
        })
    }

    /// The digest in force for deal epoch `epoch` (`digestInForce`): the last posted
    /// strictly before the epoch's start; version 0 if none (the epoch cannot be a
    /// fault). Errors: `WrongDealState` (not accepted), `EpochOutOfRange`, `UnknownDeal`.
    pub async fn digest_in_force(&self, deal_id: u64, epoch: u64) -> Result<DigestInForce, ChainError> {
        let r = self.view("digestInForce", self.market.digestInForce(U256::from(deal_id), epoch)).await?;
        Ok(DigestInForce { version: r.version, hash: r.hash, write_count: r.writeCount })
    }
}
