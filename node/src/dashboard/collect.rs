//! [`Collector`]: the task that keeps the dashboard's [`Snapshot`] fresh. Each refresh
//! reads, for the provider's deals, what the market says (deals opened with it,
//! `getDeal`, `epochStatus` of the epochs not settled yet, `DigestPosted`,
//! `AuditRecorded` and `DisputeOpened` logs, `getDispute` of the disputes not closed,
//! the settling events for money, `owed`) and what the store holds (space), then
//! replaces the snapshot whole. Logs are read incrementally (a cursor per kind) and
//! settled epochs, closed disputes and ended deals are not read again, so a refresh costs a few
//! calls per deal. A failed refresh keeps the previous data and reports its error.
//!
//! It reads the chain on its own, apart from the chain agent: the dashboard shows what
//! the chain settled, whoever sent the transaction, and a dashboard bug cannot stall
//! the agent.

use super::model::{
    AuditRow, DealRow, DigestRow, DisputeCounts, DisputeRow, EpochCounts, EpochState, ResizeTerms, Sample, Snapshot, Space, Summary,
    Tokens, MAX_SAMPLES,
};
use crate::store::Store;
use alloy_primitives::Address;
use dpor_chain::ledger::LedgerEvent;
use dpor_chain::{DealInfo, DealState, DisputeState, EpochStatus, Market, MarketParams};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A sample is added to the series when a value changed, or after this long anyway.
const SAMPLE_EVERY: Duration = Duration::from_secs(30);

/// The snapshot as the API handlers share it.
pub type SharedSnapshot = Arc<RwLock<Snapshot>>;

/// What the collector remembers about one deal between refreshes.
#[derive(Debug, Default)]
struct DealMemory {
    info: Option<DealInfo>,
    /// Settled epochs (proven or missed): not read again.
    settled: HashMap<u64, EpochState>,
    /// Epochs under challenge at the last refresh (commitment mode).
    challenged: std::collections::BTreeSet<u64>,
    digests: BTreeMap<u64, DigestRow>,
    audits: BTreeMap<u64, AuditRow>,
    disputes: BTreeMap<u64, DisputeRow>,
    /// Next block to read this deal's logs from.
    cursor: u64,
    earned: u128,
    slashed: u128,
}

/// Reads the chain and the store for the dashboard (see the module docs).
pub struct Collector {
    market: Market,
    me: Address,
    store: Arc<Store>,
    snapshot: SharedSnapshot,
    params: Option<MarketParams>,
    deals: BTreeMap<u64, DealMemory>,
    deal_cursor: u64,
    ledger_cursor: u64,
    earned: u128,
    slashed: u128,
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Unix time in seconds, to the millisecond (the series' x axis: several samples may
/// fall in one second).
fn unix_now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_millis() as f64 / 1000.0)
}

fn state_name(s: DealState) -> &'static str {
    match s {
        DealState::None => "none",
        DealState::Open => "open",
        DealState::Active => "active",
        DealState::Completed => "completed",
        DealState::Terminated => "terminated",
        DealState::Cancelled => "cancelled",
    }
}

/// What one ledger event paid to (first) and took from (second) the provider.
fn money(ev: &LedgerEvent) -> (u128, u128) {
    match ev {
        LedgerEvent::EpochProven { payment, .. } | LedgerEvent::UploadLockPaid { payment, .. } => (*payment, 0),
        LedgerEvent::EpochsClaimed { pay, .. } => (*pay, 0),
        LedgerEvent::DisputeAnswered { bond, .. } => (*bond, 0),
        LedgerEvent::ChallengeAnswered { pay, bond, .. } => (pay.saturating_add(*bond), 0),
        LedgerEvent::EpochMissed { slashed, .. }
        | LedgerEvent::DisputeSlashed { slashed, .. }
        | LedgerEvent::ChallengeFaulted { slashed, .. }
        | LedgerEvent::DealClosed { slashed, .. } => (0, *slashed),
        LedgerEvent::EpochExcused { .. }
        | LedgerEvent::DisputeOpened { .. }
        | LedgerEvent::ChallengeOpened { .. }
        | LedgerEvent::DealTerminated { .. } => (0, 0),
    }
}

impl Collector {
    /// A collector for the provider `me` on `market`, over `store`, writing `snapshot`.
    /// It reads logs from block `from_block` (0: the whole chain).
    pub fn new(market: Market, me: Address, store: Arc<Store>, snapshot: SharedSnapshot, from_block: u64) -> Collector {
        Collector {
            market,
            me,
            store,
            snapshot,
            params: None,
            deals: BTreeMap::new(),
            deal_cursor: from_block,
            ledger_cursor: from_block,
            earned: 0,
            slashed: 0,
        }
    }

    /// Refreshes every `interval` until `shutdown` becomes true (or its sender is dropped).
    pub async fn run(mut self, interval: Duration, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        loop {
            if *shutdown.borrow() {
                break;
            }
            self.refresh().await;
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                changed = shutdown.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
            }
        }
    }

    /// One refresh: on success the snapshot is replaced; on error only its `error` is set.
    pub async fn refresh(&mut self) {
        match self.read().await {
            Ok(fresh) => {
                let mut s = self.snapshot.write().unwrap_or_else(std::sync::PoisonError::into_inner);
                let series = std::mem::take(&mut s.series);
                *s = Snapshot { series, ..fresh };
                push_sample(&mut s, unix_now_ms());
            }
            Err(e) => {
                tracing::warn!(error = %e, "dashboard: cannot refresh from the chain; retrying");
                let mut s = self.snapshot.write().unwrap_or_else(std::sync::PoisonError::into_inner);
                s.summary.error = Some(format!("{e:#}"));
            }
        }
    }

    async fn read(&mut self) -> anyhow::Result<Snapshot> {
        let block = self.market.block_number().await?;
        let now = self.market.latest_timestamp().await?;
        let params = match &self.params {
            Some(p) => *p,
            None => {
                let p = self.market.params().await?;
                self.params = Some(p);
                p
            }
        };
        if self.deal_cursor <= block {
            for d in self.market.deals_for_provider(self.me, self.deal_cursor).await? {
                if d.provider == self.me {
                    self.deals.entry(d.deal_id).or_insert_with(|| DealMemory { cursor: d.block, ..Default::default() });
                }
            }
            self.deal_cursor = block + 1;
        }
        if self.ledger_cursor <= block {
            for ev in self.market.ledger_events(self.ledger_cursor, block).await? {
                let Some(m) = self.deals.get_mut(&ev.deal()) else { continue };
                let (paid, taken) = money(&ev);
                m.earned = m.earned.saturating_add(paid);
                m.slashed = m.slashed.saturating_add(taken);
                self.earned = self.earned.saturating_add(paid);
                self.slashed = self.slashed.saturating_add(taken);
            }
            self.ledger_cursor = block + 1;
        }
        // Every contract read at `block`, the block the payment logs above end at: an
        // epoch is never shown proven before its pay is counted.
        let at = self.market.at_block(block);
        let ids: Vec<u64> = self.deals.keys().copied().collect();
        for id in ids {
            self.read_deal(&at, id, block, now, &params).await?;
        }
        let owed = u128::try_from(at.owed(self.me).await?).unwrap_or(u128::MAX);
        let store = self.store.clone();
        let space = tokio::task::spawn_blocking(move || space_of(&store)).await??;
        Ok(self.snapshot_of(block, now, owed, space, &params))
    }

    /// One deal's logs since its cursor and its state as of `block` (`at`: the market
    /// client with its reads pinned to `block`).
    async fn read_deal(&mut self, at: &Market, id: u64, block: u64, now: u64, params: &MarketParams) -> anyhow::Result<()> {
        // A deal that ended (completed, terminated, cancelled) with no dispute left
        // open changes no more: not read again.
        if let Some(m) = self.deals.get(&id) {
            let ended =
                m.info.as_ref().is_some_and(|i| matches!(i.state, DealState::Completed | DealState::Terminated | DealState::Cancelled));
            if ended && m.disputes.values().all(|q| q.state == "answered" || q.state == "slashed") {
                return Ok(());
            }
        }
        let info = at.get_deal(id).await?;
        let Some(m) = self.deals.get_mut(&id) else { return Ok(()) };
        if m.cursor <= block {
            for p in self.market.digests(id, m.cursor).await? {
                // The signatures are in the posting transaction's calldata (the event
                // does not carry them); only when that calldata holds this very digest.
                let sigs = match p.tx {
                    Some(tx) => self.market.posting_signatures(tx).await?.filter(|s| s.digest == p.digest),
                    None => None,
                };
                m.digests.insert(
                    p.digest.version,
                    DigestRow {
                        version: p.digest.version,
                        write_count: p.digest.writeCount,
                        rebuild_count: p.digest.rebuildCount,
                        num_blocks: p.digest.numBlocks,
                        hash: format!("{:#x}", p.hash),
                        block: p.block,
                        root_u: format!("{:#x}", p.digest.rootU),
                        root_c: format!("{:#x}", p.digest.rootC),
                        level_roots: p.digest.levelRoots.iter().map(|r| format!("{r:#x}")).collect(),
                        owner_sig: sigs.as_ref().map(|s| format!("0x{}", alloy_primitives::hex::encode(&s.owner_sig))),
                        resize: sigs.and_then(|s| s.resize).map(|(price, collateral)| ResizeTerms {
                            price_per_epoch: price.to_string(),
                            collateral: collateral.to_string(),
                        }),
                    },
                );
            }
            for a in self.market.audits_for_deal(id, m.cursor).await? {
                m.audits.insert(
                    a.audit_id,
                    AuditRow {
                        id: a.audit_id,
                        epoch: a.epoch,
                        version: a.version,
                        passed: a.passed,
                        auditor: format!("{:#x}", a.auditor),
                        block: a.block,
                    },
                );
            }
            for q in self.market.disputes_for_deal(id, m.cursor).await? {
                m.disputes.entry(q.dispute_id).or_insert(DisputeRow {
                    id: q.dispute_id,
                    challenger: format!("{:#x}", q.challenger),
                    version: q.version,
                    state: "unknown".into(),
                    deadline: q.deadline,
                    block: q.block,
                });
            }
            m.cursor = block + 1;
        }
        for q in m.disputes.values_mut().filter(|q| q.state == "unknown" || q.state == "open") {
            q.state = match at.get_dispute(q.id).await?.state {
                DisputeState::Open => "open",
                DisputeState::Answered => "answered",
                DisputeState::Slashed => "slashed",
                DisputeState::None => "unknown",
            }
            .into();
        }
        m.challenged.clear();
        if info.accepted() {
            for e in 0..u64::from(info.num_epochs) {
                if m.settled.contains_key(&e) || params.window(&info, e).start > now {
                    continue;
                }
                match at.epoch_status(id, e).await? {
                    EpochStatus::Proven => {
                        m.settled.insert(e, EpochState::Proven);
                    }
                    EpochStatus::Missed => {
                        m.settled.insert(e, EpochState::Missed);
                    }
                    EpochStatus::Challenged => {
                        m.challenged.insert(e);
                    }
                    EpochStatus::None => {}
                }
            }
        }
        m.info = Some(info);
        Ok(())
    }

    /// The epochs of a deal as the strip shows them.
    fn epoch_cells(m: &DealMemory, info: &DealInfo, now: u64, params: &MarketParams) -> Vec<EpochState> {
        let mut cells = Vec::with_capacity(info.num_epochs as usize);
        for e in 0..u64::from(info.num_epochs) {
            let cell = if let Some(s) = m.settled.get(&e) {
                *s
            } else if !info.accepted() || params.window(info, e).start > now {
                EpochState::Future
            } else if m.challenged.contains(&e) {
                EpochState::Challenged
            } else {
                EpochState::Pending
            };
            cells.push(cell);
        }
        cells
    }

    fn snapshot_of(&self, block: u64, now: u64, owed: u128, space: Space, params: &MarketParams) -> Snapshot {
        let mut deals = BTreeMap::new();
        let mut by_state: BTreeMap<String, u64> = BTreeMap::new();
        let mut epochs = EpochCounts::default();
        let mut disputes = DisputeCounts::default();
        for (id, m) in &self.deals {
            let Some(info) = &m.info else { continue };
            let cells = Self::epoch_cells(m, info, now, params);
            let counts = EpochCounts::of(&cells);
            epochs.add(&counts);
            *by_state.entry(state_name(info.state).into()).or_default() += 1;
            for q in m.disputes.values() {
                match q.state.as_str() {
                    "open" => disputes.open += 1,
                    "answered" => disputes.answered += 1,
                    "slashed" => disputes.slashed += 1,
                    _ => {}
                }
            }
            deals.insert(
                *id,
                DealRow {
                    id: *id,
                    owner: format!("{:#x}", info.owner),
                    state: state_name(info.state).into(),
                    num_blocks: info.num_blocks,
                    block_size: info.block_size,
                    num_epochs: info.num_epochs,
                    price_per_epoch: info.price_per_epoch.to_string(),
                    digest_version: info.digest_version,
                    write_count: info.write_count,
                    failures: info.failures,
                    open_disputes: info.open_disputes,
                    earned: m.earned.to_string(),
                    slashed: m.slashed.to_string(),
                    epoch0_start: if info.accepted() { params.window(info, 0).start } else { 0 },
                    epoch_seconds: params.epoch_seconds,
                    epochs: cells,
                    epoch_counts: counts,
                    digests: m.digests.values().cloned().collect(),
                    audits: m.audits.values().cloned().collect(),
                    disputes: m.disputes.values().cloned().collect(),
                },
            );
        }
        let summary = Summary {
            provider: format!("{:#x}", self.me),
            market: format!("{:#x}", self.market.address()),
            chain_id: self.market.chain_id(),
            block,
            chain_time: now,
            updated_at: unix_now(),
            error: None,
            deals: by_state,
            epochs,
            tokens: Tokens { earned: self.earned.to_string(), slashed: self.slashed.to_string(), owed: owed.to_string() },
            disputes,
            space,
        };
        Snapshot { summary, deals, series: Default::default() }
    }
}

/// The store's space (the same sums as the metrics' gauges).
fn space_of(store: &Store) -> anyhow::Result<Space> {
    let (mut blocks, mut bytes) = (0u64, 0u64);
    for id in store.deals() {
        let Ok(v) = store.view(id) else { continue };
        blocks = blocks.saturating_add(v.params.num_blocks);
        bytes = bytes.saturating_add(v.params.num_blocks.saturating_mul(u64::from(v.params.block_bytes)));
    }
    let s = store.space()?;
    Ok(Space { stored_blocks: blocks, stored_bytes: bytes, disk_used_bytes: s.used, free_bytes: s.available })
}

/// Appends the snapshot's current values to its series when one changed or
/// [`SAMPLE_EVERY`] passed since the last sample; keeps at most [`MAX_SAMPLES`].
fn push_sample(s: &mut Snapshot, t: f64) {
    let num = |x: &str| x.parse::<f64>().unwrap_or(0.0);
    let tokens = &s.summary.tokens;
    let sample = Sample {
        t,
        stored_bytes: s.summary.space.stored_bytes,
        disk_used_bytes: s.summary.space.disk_used_bytes,
        earned: num(&tokens.earned),
        owed: num(&tokens.owed),
        slashed: num(&tokens.slashed),
    };
    let same = |a: &Sample| {
        a.stored_bytes == sample.stored_bytes
            && a.disk_used_bytes == sample.disk_used_bytes
            && a.earned == sample.earned
            && a.owed == sample.owed
            && a.slashed == sample.slashed
    };
    if let Some(last) = s.series.back() {
        if same(last) && sample.t < last.t + SAMPLE_EVERY.as_secs_f64() {
            return;
        }
    }
    s.series.push_back(sample);
    while s.series.len() > MAX_SAMPLES {
        s.series.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(earned: &str) -> Snapshot {
        let mut s = Snapshot::default();
        s.summary.tokens.earned = earned.into();
        s
    }

    /// A sample is kept on change or after SAMPLE_EVERY, not on every refresh.
    #[test]
    fn samples_on_change_or_after_the_interval() {
        let mut s = snap("0");
        push_sample(&mut s, 100.0);
        let series = std::mem::take(&mut s.series);
        let mut s = Snapshot { series, ..snap("0") };
        push_sample(&mut s, 101.0);
        assert_eq!(s.series.len(), 1, "unchanged within the interval");
        let series = std::mem::take(&mut s.series);
        let mut s = Snapshot { series, ..snap("5") };
        push_sample(&mut s, 101.5);
        assert_eq!(s.series.len(), 2);
        assert_eq!(s.series.back().map(|x| x.earned), Some(5.0));
        let series = std::mem::take(&mut s.series);
        let mut s = Snapshot { series, ..snap("5") };
        push_sample(&mut s, 101.5 + SAMPLE_EVERY.as_secs_f64());
        assert_eq!(s.series.len(), 3, "unchanged but the interval passed");
    }

    /// What each settling event pays and takes.
    #[test]
    fn money_of_ledger_events() {
        assert_eq!(money(&LedgerEvent::EpochProven { deal: 1, epoch: 0, payment: 7 }), (7, 0));
        assert_eq!(money(&LedgerEvent::ChallengeAnswered { deal: 1, pay: 7, bond: 3 }), (10, 0));
        assert_eq!(money(&LedgerEvent::EpochMissed { deal: 1, epoch: 0, slashed: 4 }), (0, 4));
        assert_eq!(money(&LedgerEvent::DisputeOpened { deal: 1 }), (0, 0));
    }
}
