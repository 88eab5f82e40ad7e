//! [`ChainAgent`]: its memory and its loop. Each tick reads the latest block's
//! timestamp ("now" for the market's time checks) and runs the steps in order
//! (registration, deals: accept, epoch proof, digests, close when finished; disputes;
//! withdrawal); a step that fails logs and is retried next tick.

use super::{AgentConfig, NodeRuns};
use alloy_primitives::{Address, B256};
use dpor_chain::{DealInfo, Market, MarketParams};
use dpor_core::digest::Digest;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// What the agent remembers about one of its deals.
#[derive(Debug, Default)]
pub(crate) struct DealTrack {
    /// Latest `getDeal` (refreshed each tick).
    pub(crate) info: Option<DealInfo>,
    /// Next block to scan this deal's `DigestPosted` / `DisputeOpened` logs from.
    pub(crate) cursor: u64,
    /// Epochs settled, proven by us, or given up (data lost): not tried again.
    pub(crate) done_epochs: BTreeSet<u64>,
    /// The epoch whose digest in force we pinned last.
    pub(crate) pinned_epoch: Option<u64>,
    /// Epoch pins below this were released.
    pub(crate) released_before: u64,
    /// `closeDeal` was sent (or the deal is closed).
    pub(crate) closed: bool,
    /// Epochs below this were checked for a beacon-outage excuse (`step_excused`).
    pub(crate) excuse_checked_below: u64,
    /// The deal was refused (acceptance policy); the reason was logged once.
    pub(crate) refused: bool,
}

/// What the agent remembers about a dispute on one of its deals.
#[derive(Debug)]
pub(crate) struct DisputeTrack {
    pub(crate) deal: u64,
    pub(crate) digest_hash: B256,
    pub(crate) run_tag: u8,
    pub(crate) position: u64,
    pub(crate) chunk_index: u32,
    pub(crate) deadline: u64,
    /// `NodeRuns::dispute_opened` was called.
    pub(crate) pinned: bool,
    /// The data is lost: no answer will be sent.
    pub(crate) gave_up: bool,
    /// `NodeRuns::dispute_closed` was called: nothing left to do.
    pub(crate) closed: bool,
}

/// The provider's chain agent (see the module docs of `chain_tasks`).
pub struct ChainAgent {
    pub(crate) market: Market,
    pub(crate) runs: Arc<dyn NodeRuns>,
    pub(crate) config: AgentConfig,
    pub(crate) registered: bool,
    /// Next block to scan `DealOpened` logs from.
    pub(crate) deal_cursor: u64,
    pub(crate) deals: BTreeMap<u64, DealTrack>,
    /// Every digest preimage seen in `DigestPosted` logs of our deals, by hash.
    pub(crate) digests: HashMap<B256, Digest>,
    pub(crate) disputes: BTreeMap<u64, DisputeTrack>,
    /// The market's parameters (immutable), read on the first tick.
    pub(crate) params: Option<MarketParams>,
    /// Commitment mode: what was committed and which challenges are pending.
    pub(crate) commits: super::commit::CommitTrack,
    /// The last commitment posted: (global epoch, entries, gas, seconds to build).
    pub(crate) last_commit: Option<(u64, u32, u64, f64)>,
    warned_no_signer: bool,
    /// Where the node's metrics go, if it exports any.
    pub(crate) metrics: Option<Arc<crate::metrics::NodeMetrics>>,
    /// Next block to read the market's settling events from (metrics only).
    pub(crate) ledger_cursor: u64,
}

impl ChainAgent {
    /// An agent acting for `market`'s signer (the provider account), reading blocks
    /// through `runs`. Nothing happens until [`ChainAgent::run`].
    pub fn new(market: Market, runs: Arc<dyn NodeRuns>, config: AgentConfig) -> Self {
        let from = config.from_block;
        Self {
            market,
            runs,
            config,
            registered: false,
            deal_cursor: from,
            deals: BTreeMap::new(),
            digests: HashMap::new(),
            disputes: BTreeMap::new(),
            params: None,
            commits: super::commit::CommitTrack { challenge_cursor: from, ..Default::default() },
            last_commit: None,
            warned_no_signer: false,
            metrics: None,
            ledger_cursor: from,
        }
    }

    /// Reports to `metrics` (docs/OPERATIONS.md, "Metrics"): each poll's chain
    /// reachability (for `/health`), this provider's deals by state, the tokens owed
    /// and withdrawn, and the settling events of its deals (epochs, disputes,
    /// challenges, payments, slashes), read from the market's logs each tick.
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::NodeMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Runs ticks every `poll_interval` until `shutdown` becomes true (or its sender is
    /// dropped). Never returns early on chain errors and never panics on them.
    pub async fn run(mut self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        tracing::info!(market = %self.market.address(), account = ?self.market.account(), "chain agent started");
        loop {
            if *shutdown.borrow() {
                break;
            }
            self.tick().await;
            tokio::select! {
                _ = tokio::time::sleep(self.config.poll_interval) => {}
                changed = shutdown.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
            }
        }
        tracing::info!("chain agent stopped");
    }

    /// One pass over every step.
    pub async fn tick(&mut self) {
        let Some(me) = self.market.account() else {
            if !self.warned_no_signer {
                tracing::error!("the chain agent needs the provider's key; it will do nothing");
                self.warned_no_signer = true;
            }
            return;
        };
        if let Err(e) = self.ensure_registered(me).await {
            tracing::warn!(error = %e, "registration failed; retrying next tick");
            return;
        }
        let block = match self.market.block_number().await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the block number");
                if let Some(m) = &self.metrics {
                    m.chain_failed(&e.to_string());
                }
                return;
            }
        };
        if let Some(m) = &self.metrics {
            m.chain_ok(block);
        }
        let now = match self.market.latest_timestamp().await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the latest block's timestamp");
                return;
            }
        };
        if self.params.is_none() {
            match self.market.params().await {
                Ok(p) => self.params = Some(p),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the market's parameters");
                    return;
                }
            }
        }
        self.scan_deals(me, block).await;
        let ids: Vec<u64> = self.deals.keys().copied().collect();
        for id in ids {
            self.step_deal(me, id, block, now).await;
        }
        if self.config.epoch_proofs == super::EpochProofs::Commitment {
            self.step_commitments(me, now).await;
        }
        self.step_disputes(now).await;
        self.step_metrics(block).await;
        if self.config.withdraw {
            self.step_withdraw(me).await;
        } else if let Some(m) = &self.metrics {
            match self.market.owed(me).await {
                Ok(o) => m.set_owed(u128::try_from(o).unwrap_or(u128::MAX)),
                Err(e) => tracing::warn!(error = %e, "cannot read owed"),
            }
        }
    }

    /// Metrics: the deals-by-state gauge, and the settling events of this provider's
    /// deals in the blocks up to `block` (once its `DealOpened` logs are read up to
    /// `block`, so no event of a deal not known yet is passed over).
    async fn step_metrics(&mut self, block: u64) {
        let Some(m) = self.metrics.clone() else { return };
        m.deal_states(self.deals.values().filter_map(|t| t.info.as_ref().map(|i| i.state)));
        if self.deal_cursor <= block || self.ledger_cursor > block {
            return;
        }
        match self.market.ledger_events(self.ledger_cursor, block).await {
            Ok(events) => {
                for ev in events.iter().filter(|ev| self.deals.contains_key(&ev.deal())) {
                    m.ledger(ev);
                }
                self.ledger_cursor = block + 1;
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the market's settling events (metrics); retrying next tick"),
        }
    }

    /// The digest preimage with `hash` on `deal`: from memory, else from the logs.
    pub(crate) async fn digest_for(&mut self, deal: u64, hash: B256) -> Option<Digest> {
        if let Some(d) = self.digests.get(&hash) {
            return Some(d.clone());
        }
        match self.market.digest_by_hash(deal, hash, self.config.from_block).await {
            Ok(Some(d)) => {
                self.digests.insert(hash, d.clone());
                Some(d)
            }
            Ok(None) => {
                tracing::warn!(deal, %hash, "no DigestPosted log for this digest hash");
                None
            }
            Err(e) => {
                tracing::warn!(deal, error = %e, "cannot read DigestPosted logs");
                None
            }
        }
    }

    async fn step_withdraw(&mut self, me: Address) {
        match self.market.owed(me).await {
            Ok(o) if !o.is_zero() => match self.market.withdraw().await {
                Ok(amount) => {
                    tracing::info!(%amount, "withdrew payments (wei)");
                    if let Some(m) = &self.metrics {
                        m.withdrew(u128::try_from(amount).unwrap_or(u128::MAX));
                        m.set_owed(u128::try_from(o.saturating_sub(amount)).unwrap_or(u128::MAX));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "withdraw failed");
                    if let Some(m) = &self.metrics {
                        m.set_owed(u128::try_from(o).unwrap_or(u128::MAX));
                    }
                }
            },
            Ok(_) => {
                if let Some(m) = &self.metrics {
                    m.set_owed(0);
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read owed"),
        }
    }
}
