//! Queries over the market's event logs: digests (whose whole preimage only lives in
//! `DigestPosted` logs), disputes and deals. Each scans from a start block (0 = the
//! whole chain) to the latest block with one `eth_getLogs`.

use crate::bindings::DporMarket;
use crate::client::{rpc_err, to_u64, Market};
use crate::convert::from_chain_digest;
use crate::error::ChainError;
use crate::types::{AuditRecordedEvent, DealOpenedEvent, DisputeOpenedEvent, PostedDigest, PostingSignatures};
use alloy::providers::Provider;
use alloy::rpc::types::{Filter, Log};
use alloy_primitives::{Address, B256, U256};
use alloy_sol_types::{SolCall, SolEvent};
use dpor_core::digest::Digest;

impl Market {
    pub(crate) async fn logs<E: SolEvent>(&self, what: &'static str, filter: Filter) -> Result<Vec<(E, u64)>, ChainError> {
        Ok(self.logs_with_tx(what, filter).await?.into_iter().map(|(e, block, _)| (e, block)).collect())
    }

    /// As [`Market::logs`], with each log's transaction hash.
    async fn logs_with_tx<E: SolEvent>(&self, what: &'static str, filter: Filter) -> Result<Vec<(E, u64, Option<B256>)>, ChainError> {
        let filter = filter.address(self.address()).event_signature(E::SIGNATURE_HASH);
        let logs: Vec<Log> = self.stats.note(self.provider.get_logs(&filter).await.map_err(|e| rpc_err(what, e)))?;
        logs.iter()
            .map(|l| {
                let decoded = l.log_decode::<E>().map_err(|e| ChainError::Decode(format!("{what}: {e}")))?;
                Ok((decoded.inner.data, l.block_number.unwrap_or(0), l.transaction_hash))
            })
            .collect()
    }

    /// The signatures the digest posted by transaction `tx` was posted with, decoded
    /// from its calldata. `None` if the transaction is unknown, was not sent to this
    /// market directly, or is neither a `postDigest` nor a `resizeDeal` (e.g. a call
    /// through a multicall or a smart account: the signatures are then not in the
    /// top-level calldata).
    ///
    /// # Errors
    /// [`ChainError`] on an RPC failure.
    pub async fn posting_signatures(&self, tx: B256) -> Result<Option<PostingSignatures>, ChainError> {
        /// The two fields of `eth_getTransactionByHash` read here.
        #[derive(Debug, serde::Deserialize)]
        struct TxFields {
            to: Option<Address>,
            input: alloy_primitives::Bytes,
        }
        let got: Option<TxFields> = self.stats.note(
            self.provider.raw_request("eth_getTransactionByHash".into(), (tx,)).await.map_err(|e| rpc_err("eth_getTransactionByHash", e)),
        )?;
        let Some(t) = got else { return Ok(None) };
        if t.to != Some(self.address()) {
            return Ok(None);
        }
        if let Ok(c) = DporMarket::postDigestCall::abi_decode(&t.input) {
            return Ok(Some(PostingSignatures {
                digest: from_chain_digest(&c.d),
                owner_sig: c.ownerSig.to_vec(),
                provider_sig: c.providerSig.to_vec(),
                resize: None,
            }));
        }
        if let Ok(c) = DporMarket::resizeDealCall::abi_decode(&t.input) {
            return Ok(Some(PostingSignatures {
                digest: from_chain_digest(&c.d),
                owner_sig: c.ownerSig.to_vec(),
                provider_sig: c.providerSig.to_vec(),
                resize: Some((c.pricePerEpoch, c.collateral)),
            }));
        }
        Ok(None)
    }

    /// Every digest posted for `deal_id` from block `from_block` on, oldest first.
    pub async fn digests(&self, deal_id: u64, from_block: u64) -> Result<Vec<PostedDigest>, ChainError> {
        let f = Filter::new().topic1(B256::from(U256::from(deal_id))).from_block(from_block);
        let evs = self.logs_with_tx::<DporMarket::DigestPosted>("DigestPosted logs", f).await?;
        Ok(evs
            .into_iter()
            .map(|(e, block, tx)| PostedDigest { digest: from_chain_digest(&e.digest), hash: e.digestHash, block, tx })
            .collect())
    }

    /// The latest digest posted for `deal_id` (the one proofs are checked against) and
    /// its hash, from the `DigestPosted` logs; `None` if none was posted.
    pub async fn latest_digest(&self, deal_id: u64) -> Result<Option<(Digest, B256)>, ChainError> {
        Ok(self.digests(deal_id, 0).await?.into_iter().max_by_key(|p| p.digest.version).map(|p| (p.digest, p.hash)))
    }

    /// The preimage of digest hash `hash` of deal `deal_id` (e.g. the digest a dispute
    /// is against), searching the logs from `from_block`; `None` if not found.
    pub async fn digest_by_hash(&self, deal_id: u64, hash: B256, from_block: u64) -> Result<Option<Digest>, ChainError> {
        Ok(self.digests(deal_id, from_block).await?.into_iter().find(|p| p.hash == hash).map(|p| p.digest))
    }

    /// Every dispute opened on `deal_id` from block `from_block` on, oldest first.
    pub async fn disputes_for_deal(&self, deal_id: u64, from_block: u64) -> Result<Vec<DisputeOpenedEvent>, ChainError> {
        // DisputeOpened(disputeId indexed, dealId indexed, challenger indexed, …): the deal is topic 2.
        let f = Filter::new().topic2(B256::from(U256::from(deal_id))).from_block(from_block);
        self.logs::<DporMarket::DisputeOpened>("DisputeOpened logs", f)
            .await?
            .into_iter()
            .map(|(e, block)| {
                Ok(DisputeOpenedEvent {
                    dispute_id: to_u64(e.disputeId)?,
                    deal_id: to_u64(e.dealId)?,
                    challenger: e.challenger,
                    version: e.version,
                    digest_hash: e.digestHash,
                    run_tag: e.runTag,
                    position: e.position,
                    chunk_index: e.chunkIndex,
                    deadline: e.deadline,
                    block,
                })
            })
            .collect()
    }

    /// Every deal opened with `provider` from block `from_block` on, oldest first.
    pub async fn deals_for_provider(&self, provider: Address, from_block: u64) -> Result<Vec<DealOpenedEvent>, ChainError> {
        // DealOpened(dealId indexed, owner indexed, provider indexed, …): the provider is topic 3.
        let f = Filter::new().topic3(provider.into_word()).from_block(from_block);
        self.logs::<DporMarket::DealOpened>("DealOpened logs", f)
            .await?
            .into_iter()
            .map(|(e, block)| {
                Ok(DealOpenedEvent {
                    deal_id: to_u64(e.dealId)?,
                    owner: e.owner,
                    provider: e.provider,
                    num_blocks: e.numBlocks,
                    block_size: e.blockSize,
                    num_epochs: e.numEpochs,
                    block,
                })
            })
            .collect()
    }

    /// The audit records `auditor` made for epoch `epoch` of `deal_id` (`AuditRecorded`
    /// logs from `from_block`; disputes record their audit too): (audit id, passed).
    pub async fn audits_by(&self, deal_id: u64, epoch: u64, auditor: Address, from_block: u64) -> Result<Vec<(u64, bool)>, ChainError> {
        // AuditRecorded(auditId indexed, dealId indexed, epoch indexed, …, auditor).
        let f = Filter::new().topic2(B256::from(U256::from(deal_id))).topic3(B256::from(U256::from(epoch))).from_block(from_block);
        self.logs::<DporMarket::AuditRecorded>("AuditRecorded logs", f)
            .await?
            .into_iter()
            .filter(|(e, _)| e.auditor == auditor)
            .map(|(e, _)| Ok((to_u64(e.auditId)?, e.passed)))
            .collect()
    }

    /// Every audit recorded for `deal_id` (any epoch, any auditor; `AuditRecorded` logs
    /// from block `from_block` on), oldest first.
    pub async fn audits_for_deal(&self, deal_id: u64, from_block: u64) -> Result<Vec<AuditRecordedEvent>, ChainError> {
        let f = Filter::new().topic2(B256::from(U256::from(deal_id))).from_block(from_block);
        self.logs::<DporMarket::AuditRecorded>("AuditRecorded logs", f)
            .await?
            .into_iter()
            .map(|(e, block)| {
                Ok(AuditRecordedEvent {
                    audit_id: to_u64(e.auditId)?,
                    deal_id: to_u64(e.dealId)?,
                    epoch: e.epoch,
                    version: e.version,
                    passed: e.passed,
                    transcript_hash: e.transcriptHash,
                    auditor: e.auditor,
                    block,
                })
            })
            .collect()
    }

    /// The disputes `challenger` opened on `deal_id` from `from_block` on.
    pub async fn disputes_by(&self, deal_id: u64, challenger: Address, from_block: u64) -> Result<Vec<DisputeOpenedEvent>, ChainError> {
        Ok(self.disputes_for_deal(deal_id, from_block).await?.into_iter().filter(|q| q.challenger == challenger).collect())
    }
}
