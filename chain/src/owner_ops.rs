//! Calls a data owner makes: opening, cancelling and closing deals, posting
//! dual-signed digests (ENCODING.md §5).

use crate::bindings::DporMarket;
use crate::client::{to_u64, Market};
use crate::convert::to_chain_digest;
use crate::error::ChainError;
use crate::types::DealInfo;
use alloy_primitives::{Address, Bytes, B256, U256};
use dpor_core::digest::Digest;

impl Market {
    /// Opens a deal with `provider`, escrowing `price_per_block_epoch · num_blocks ·
    /// num_epochs` wei from the signer (approve first). `num_blocks` N is a power of two,
    /// `block_size` β in bytes, `lambda` λ audit samples per run, `samples_per_epoch` K
    /// (1..8), `num_epochs` the duration. Returns the deal id. Errors: `NotRegistered`,
    /// `NumBlocksNotPowerOfTwo`, `InvalidParameter`, `PriceBelowAsk`, ERC-20 errors.
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
    ) -> Result<u64, ChainError> {
        let call = self.market.openDeal(
            provider,
            num_blocks,
            block_size,
            lambda,
            samples_per_epoch,
            num_epochs,
            price_per_block_epoch,
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

    /// Closes an Active deal after its last epoch's deadline (anyone): escrow of
    /// unproven epochs to the owner, remaining collateral to the provider (credited;
    /// pull with [`Market::withdraw`]). Errors: `DealNotOver`, `DisputesOpen`.
    pub async fn close_deal(&self, deal_id: u64) -> Result<B256, ChainError> {
        Ok(self.send("closeDeal", self.market.closeDeal(U256::from(deal_id))).await?.transaction_hash)
    }
}
