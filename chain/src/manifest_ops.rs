//! The dispersed-file registry `FileManifest` (docs/CONTRACTS.md §10): record a file's
//! shard deals, move a shard to a new deal after a repair, read a record, and rebuild
//! an owner's file list from the registry's events alone (what a fresh machine does).

use crate::bindings::FileManifest;
use crate::client::{rpc_err, to_u64, Market};
use crate::error::ChainError;
use alloy::providers::{DynProvider, Provider};
use alloy::rpc::types::{Filter, Log};
use alloy_primitives::{Address, B256, U256};
use alloy_sol_types::SolEvent;

/// A client of one deployed `FileManifest`, signing with the [`Market`] client's signer
/// (the deals' owner). Cheap to clone.
#[derive(Clone)]
pub struct ManifestRegistry {
    market: Market,
    inst: FileManifest::FileManifestInstance<DynProvider>,
}

impl std::fmt::Debug for ManifestRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManifestRegistry").field("address", self.inst.address()).field("market", &self.market).finish()
    }
}

/// One shard's deal and that deal's provider, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRef {
    /// The market deal holding the shard.
    pub deal_id: u64,
    /// Its provider (distinct across a file's shards).
    pub provider: Address,
}

/// A recorded file (`getFile`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// Its id (1, 2, …).
    pub file_id: u64,
    /// The owner of the file and of every listed deal.
    pub owner: Address,
    /// Data shards.
    pub k: u16,
    /// All shards.
    pub n: u16,
    /// β in bytes.
    pub block_bytes: u32,
    /// L, the file's length in bytes.
    pub file_bytes: u64,
    /// The n shards in shard order (0..k data, k..n parity).
    pub shards: Vec<ShardRef>,
}

/// A file as rebuilt from events ([`ManifestRegistry::files_of`]): the deal of every
/// shard (providers are not in the events; read them from the market's deals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFromLogs {
    /// Its id.
    pub file_id: u64,
    /// Data shards.
    pub k: u16,
    /// All shards.
    pub n: u16,
    /// β in bytes.
    pub block_bytes: u32,
    /// L in bytes.
    pub file_bytes: u64,
    /// The deal of each shard, in shard order, after every `ShardReplaced`.
    pub deal_ids: Vec<u64>,
}

impl Market {
    /// A client of the `FileManifest` at `address` over this client's connection.
    pub fn manifest_registry(&self, address: Address) -> ManifestRegistry {
        ManifestRegistry { market: self.clone(), inst: FileManifest::new(address, self.provider.clone()) }
    }
}

impl ManifestRegistry {
    /// The registry's address.
    pub fn address(&self) -> Address {
        *self.inst.address()
    }

    /// Records a dispersed file: shard i lives in deal `deal_ids[i]` (the signer must own
    /// every deal; their providers must be distinct). Returns the new file id. Errors
    /// (reverts): `BadShape`, `EmptyFile`, `NotOwner`, `DealNotLive`, `DealTooSmall`,
    /// `SameProvider`.
    pub async fn record_file(
        &self,
        k: u16,
        n: u16,
        block_bytes: u32,
        file_bytes: u64,
        deal_ids: &[u64],
    ) -> Result<u64, ChainError> {
        let call = self.inst.recordFile(k, n, block_bytes, file_bytes, deal_ids.to_vec());
        let r = self.market.send("recordFile", call).await?;
        let ev = r
            .decoded_log::<FileManifest::FileRecorded>()
            .ok_or(ChainError::MissingEvent { method: "recordFile", event: "FileRecorded" })?;
        to_u64(ev.data.fileId)
    }

    /// Moves `shard` of `file_id` to deal `new_deal_id` (after a repair; the file's owner
    /// only). Errors (reverts): `NoSuchFile`, `NotOwner`, `NoSuchShard`, and those of
    /// [`ManifestRegistry::record_file`] for the new deal.
    pub async fn replace_shard(&self, file_id: u64, shard: u16, new_deal_id: u64) -> Result<(), ChainError> {
        let call = self.inst.replaceShard(U256::from(file_id), shard, new_deal_id);
        self.market.send("replaceShard", call).await?;
        Ok(())
    }

    /// Deletes `file_id`'s record (its owner only; the deals are untouched).
    pub async fn delete_file(&self, file_id: u64) -> Result<(), ChainError> {
        self.market.send("deleteFile", self.inst.deleteFile(U256::from(file_id))).await?;
        Ok(())
    }

    /// File `file_id`'s record. Errors: `NoSuchFile` (never recorded, or deleted).
    pub async fn get_file(&self, file_id: u64) -> Result<FileRecord, ChainError> {
        let f = self.market.view("getFile", self.inst.getFile(U256::from(file_id))).await?;
        Ok(FileRecord {
            file_id,
            owner: f.owner,
            k: f.k,
            n: f.n,
            block_bytes: f.blockBytes,
            file_bytes: f.fileBytes,
            shards: f.shards.iter().map(|s| ShardRef { deal_id: s.dealId, provider: s.provider }).collect(),
        })
    }

    /// Whether contract code is deployed at the registry's address (an address with no
    /// code answers every view call with empty data).
    pub async fn has_code(&self) -> Result<bool, ChainError> {
        let code = self.market.provider.get_code_at(*self.inst.address()).await.map_err(|e| rpc_err("eth_getCode", e))?;
        Ok(!code.is_empty())
    }

    /// The market whose deals this registry records (`market()`, set at deployment).
    pub async fn market_address(&self) -> Result<Address, ChainError> {
        self.market.view("market", self.inst.market()).await
    }

    /// Files recorded (ids are 1..=count; deleted ones included).
    pub async fn file_count(&self) -> Result<u64, ChainError> {
        to_u64(self.market.view("fileCount", self.inst.fileCount()).await?)
    }

    /// `owner`'s live files rebuilt from the registry's events from block `from_block`
    /// on: each `FileRecorded`, then every `ShardReplaced` in log order, minus files with
    /// a `FileDeleted`. Ordered by file id. Errors: [`ChainError::Decode`] if a
    /// `ShardReplaced` names a file or shard the logs never recorded.
    pub async fn files_of(&self, owner: Address, from_block: u64) -> Result<Vec<FileFromLogs>, ChainError> {
        let filter = Filter::new()
            .address(self.address())
            .event_signature(vec![
                FileManifest::FileRecorded::SIGNATURE_HASH,
                FileManifest::ShardReplaced::SIGNATURE_HASH,
                FileManifest::FileDeleted::SIGNATURE_HASH,
            ])
            .topic2(B256::from(owner.into_word()))
            .from_block(from_block);
        let logs: Vec<Log> =
            self.market.provider.get_logs(&filter).await.map_err(|e| rpc_err("FileManifest logs", e))?;
        let mut files: std::collections::BTreeMap<u64, FileFromLogs> = Default::default();
        let decode = |e: alloy_sol_types::Error| ChainError::Decode(format!("FileManifest log: {e}"));
        for l in &logs {
            match l.topics().first() {
                Some(&FileManifest::FileRecorded::SIGNATURE_HASH) => {
                    let e = l.log_decode::<FileManifest::FileRecorded>().map_err(decode)?.inner.data;
                    let file_id = to_u64(e.fileId)?;
                    files.insert(
                        file_id,
                        FileFromLogs {
                            file_id,
                            k: e.k,
                            n: e.n,
                            block_bytes: e.blockBytes,
                            file_bytes: e.fileBytes,
                            deal_ids: e.dealIds,
                        },
                    );
                }
                Some(&FileManifest::ShardReplaced::SIGNATURE_HASH) => {
                    let e = l.log_decode::<FileManifest::ShardReplaced>().map_err(decode)?.inner.data;
                    let file_id = to_u64(e.fileId)?;
                    let slot = files
                        .get_mut(&file_id)
                        .and_then(|f| f.deal_ids.get_mut(e.shard as usize))
                        .ok_or_else(|| {
                            ChainError::Decode(format!("ShardReplaced for file {file_id} shard {} not recorded", e.shard))
                        })?;
                    *slot = e.newDealId;
                }
                Some(&FileManifest::FileDeleted::SIGNATURE_HASH) => {
                    let e = l.log_decode::<FileManifest::FileDeleted>().map_err(decode)?.inner.data;
                    files.remove(&to_u64(e.fileId)?);
                }
                _ => {}
            }
        }
        Ok(files.into_values().collect())
    }
}

impl Market {
    /// Every account that registered as a provider (`ProviderRegistered` logs from block
    /// `from_block` on), in registration order, without repeats. Read each one's current
    /// terms with [`Market::get_provider`].
    pub async fn registered_providers(&self, from_block: u64) -> Result<Vec<Address>, ChainError> {
        use crate::bindings::DporMarket;
        let filter = Filter::new()
            .address(self.address())
            .event_signature(DporMarket::ProviderRegistered::SIGNATURE_HASH)
            .from_block(from_block);
        let logs: Vec<Log> = self.provider.get_logs(&filter).await.map_err(|e| rpc_err("ProviderRegistered logs", e))?;
        let mut out: Vec<Address> = Vec::new();
        for l in &logs {
            let e = l
                .log_decode::<DporMarket::ProviderRegistered>()
                .map_err(|e| ChainError::Decode(format!("ProviderRegistered log: {e}")))?
                .inner
                .data;
            if !out.contains(&e.provider) {
                out.push(e.provider);
            }
        }
        Ok(out)
    }
}
