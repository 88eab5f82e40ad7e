//! The node's Prometheus metrics and its health (docs/OPERATIONS.md, "Metrics"), served
//! by [`dpor_metrics::serve`] on `metrics_listen` (off unless set).
//!
//! Every counter is incremented where the thing happens:
//! - requests, their latency and the block bytes written and served: the request
//!   handler ([`crate::handler::NodeHandler::answer`]);
//! - deferred rebuilds: the store, as each run is built ([`crate::store::RebuildObserver`]);
//! - epochs proven / missed / excused, disputes and challenges received / answered /
//!   lost, tokens paid and slashed: the chain agent, from the market's settling events
//!   of this provider's deals ([`dpor_chain::ledger`]), one `eth_getLogs` per tick, so
//!   they count what the chain settled, whoever sent the transaction (counted from the
//!   agent's first scanned block: the whole history at start, by default);
//! - tokens withdrawn, deals by state, tokens owed: the chain agent's own steps;
//! - transactions, gas and RPC errors: the chain client itself
//!   ([`dpor_chain::stats::ChainStats`]), read at scrape time.
//!
//! Gauges of the store (deals, blocks and bytes held, disk used and free) and of the
//! libp2p server (connected peers) are read at scrape time.
//!
//! Token amounts are in base units (wei of the ERC-20), as float samples: exact up to
//! 2^53 base units, rounded to 16 significant digits beyond.

use crate::store::Store;
use dpor_chain::ledger::LedgerEvent;
use dpor_chain::{DealState, Market};
use dpor_proto::messages::{OwnerOp, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One label: (name, value).
type Label = [(&'static str, &'static str); 1];
/// Two labels.
type Labels2 = [(&'static str, &'static str); 2];
/// A float counter (token amounts).
type FloatCounter = Counter<f64, AtomicU64>;
/// A float gauge (token amounts).
type FloatGauge = Gauge<f64, AtomicU64>;

/// Every deal state the `dpor_node_deals` gauge reports (all set each tick, 0 included).
const DEAL_STATES: [(DealState, &str); 5] = [
    (DealState::Open, "open"),
    (DealState::Active, "active"),
    (DealState::Completed, "completed"),
    (DealState::Terminated, "terminated"),
    (DealState::Cancelled, "cancelled"),
];

/// The chain's reachability as the agent last saw it (for `/health`).
#[derive(Debug, Default)]
struct ChainHealth {
    /// When a poll last read the chain (block number) successfully.
    last_ok: Option<Instant>,
    /// The block it read then.
    block: u64,
    /// The last poll's error, if the last poll failed.
    error: Option<String>,
}

/// The node's metrics (see the module docs). Cheap to share (`Arc`); all methods take
/// `&self`.
#[derive(Debug)]
pub struct NodeMetrics {
    registry: Registry,
    requests: Family<Labels2, Counter>,
    request_seconds: Family<Label, Histogram>,
    written_bytes: Counter,
    read_bytes: Counter,
    rebuild_seconds: Family<Label, Histogram>,
    store_deals: Family<Label, Gauge>,
    stored_blocks: Gauge,
    stored_bytes: Gauge,
    disk_used_bytes: Gauge,
    free_bytes: Gauge,
    deals: Family<Label, Gauge>,
    epochs_proven: Counter,
    epochs_missed: Counter,
    epochs_excused: Counter,
    disputes_received: Family<Label, Counter>,
    disputes_answered: Family<Label, Counter>,
    disputes_lost: Family<Label, Counter>,
    earned: Family<Label, FloatCounter>,
    slashed: FloatCounter,
    withdrawn: FloatCounter,
    owed: FloatGauge,
    transactions: Family<Labels2, Counter>,
    gas: Family<Label, Counter>,
    rpc_errors: Counter,
    chain_block: Gauge,
    peers: Gauge,
    health: Mutex<ChainHealth>,
    /// How old the last successful chain poll may be for `/health` to say ok.
    health_max_age: Duration,
}

fn histogram_seconds() -> Histogram {
    // 0.5 ms … 75 s in 14 steps of ×2.5.
    Histogram::new(exponential_buckets(0.0005, 2.5, 14))
}

impl NodeMetrics {
    /// A fresh set of metrics (all zero); `/health` accepts a chain poll at most
    /// `health_max_age` old.
    pub fn new(health_max_age: Duration) -> NodeMetrics {
        let mut r = Registry::default();
        let requests = Family::<Labels2, Counter>::default();
        r.register(
            "dpor_node_requests",
            "Requests answered, by kind (wire request or owner operation) and outcome (ok, error)",
            requests.clone(),
        );
        let request_seconds = Family::<Label, Histogram>::new_with_constructor(
            histogram_seconds as fn() -> Histogram,
        );
        r.register(
            "dpor_node_request_duration_seconds",
            "Time to answer a request, by kind, seconds",
            request_seconds.clone(),
        );
        let written_bytes = Counter::default();
        r.register(
            "dpor_node_written_bytes",
            "Block bytes accepted from owners (upload, write, write batch), bytes",
            written_bytes.clone(),
        );
        let read_bytes = Counter::default();
        r.register(
            "dpor_node_read_bytes",
            "Block bytes served (reads, downloads, audit samples, coded runs, aggregates), bytes",
            read_bytes.clone(),
        );
        let rebuild_seconds = Family::<Label, Histogram>::new_with_constructor(
            histogram_seconds as fn() -> Histogram,
        );
        r.register(
            "dpor_node_background_rebuild_duration_seconds",
            "Deferred run builds (run = level or c), seconds; _count is the number of builds",
            rebuild_seconds.clone(),
        );
        let store_deals = Family::<Label, Gauge>::default();
        r.register(
            "dpor_node_store_deals",
            "Deals in the store by phase (uploading, live; damaged counts quarantined ones)",
            store_deals.clone(),
        );
        let stored_blocks = Gauge::default();
        r.register(
            "dpor_node_stored_blocks",
            "Data blocks held (N of every deal in the store)",
            stored_blocks.clone(),
        );
        let stored_bytes = Gauge::default();
        r.register(
            "dpor_node_stored_bytes",
            "Data bytes held (N times block size, summed over the deals in the store), bytes",
            stored_bytes.clone(),
        );
        let disk_used_bytes = Gauge::default();
        r.register(
            "dpor_node_disk_used_bytes",
            "Bytes of the store's files on disk (U, C, H runs, trees, metadata), bytes",
            disk_used_bytes.clone(),
        );
        let free_bytes = Gauge::default();
        r.register("dpor_node_free_capacity_bytes", "Bytes still available to the store: quota left or file-system free space, the lesser, bytes", free_bytes.clone());
        let deals = Family::<Label, Gauge>::default();
        r.register("dpor_node_deals", "This provider's deals on chain by state (open, active, completed, terminated, cancelled)", deals.clone());
        let epochs_proven = Counter::default();
        r.register("dpor_node_epochs_proven", "Epochs of this provider's deals settled proven on chain (EpochProven, claimed commitments, answered challenges)", epochs_proven.clone());
        let epochs_missed = Counter::default();
        r.register("dpor_node_epochs_missed", "Epochs of this provider's deals settled missed on chain (EpochMissed, faulted challenges, faults at close)", epochs_missed.clone());
        let epochs_excused = Counter::default();
        r.register(
            "dpor_node_epochs_excused",
            "Epochs excused for a late beacon round (no fault, no payment)",
            epochs_excused.clone(),
        );
        let disputes_received = Family::<Label, Counter>::default();
        r.register("dpor_node_disputes_received", "Disputes (kind=dispute) and commitment challenges (kind=challenge) opened against this provider", disputes_received.clone());
        let disputes_answered = Family::<Label, Counter>::default();
        r.register(
            "dpor_node_disputes_answered",
            "Disputes and challenges answered on chain (won)",
            disputes_answered.clone(),
        );
        let disputes_lost = Family::<Label, Counter>::default();
        r.register(
            "dpor_node_disputes_lost",
            "Disputes and challenges lost (slashed or faulted unanswered)",
            disputes_lost.clone(),
        );
        let earned = Family::<Label, FloatCounter>::default();
        r.register(
            "dpor_node_tokens_earned_base_units",
            "Tokens credited to this provider by its deals, by source (epochs: proven epochs; upload_lock: a never-uploaded deal; bonds: bonds of lost disputes and challenges), token base units",
            earned.clone(),
        );
        let slashed = FloatCounter::default();
        r.register("dpor_node_tokens_slashed_base_units", "Tokens taken from this provider's collateral (missed epochs, lost disputes and challenges, faults at close, termination), token base units", slashed.clone());
        let withdrawn = FloatCounter::default();
        r.register(
            "dpor_node_tokens_withdrawn_base_units",
            "Tokens this node withdrew from the market, token base units",
            withdrawn.clone(),
        );
        let owed = FloatGauge::default();
        r.register("dpor_node_tokens_owed_base_units", "Tokens the market owes this provider now (owed(provider), read each poll), token base units", owed.clone());
        let transactions = Family::<Labels2, Counter>::default();
        r.register("dpor_node_chain_transactions", "Transactions sent by this node, by contract method and outcome (mined; failed: refused at estimation, unsent or reverted)", transactions.clone());
        let gas = Family::<Label, Counter>::default();
        r.register(
            "dpor_node_chain_gas_used",
            "Gas used by this node's mined transactions, by contract method, gas units",
            gas.clone(),
        );
        let rpc_errors = Counter::default();
        r.register(
            "dpor_node_chain_rpc_errors",
            "Chain JSON-RPC calls that failed at the transport or endpoint (not contract reverts)",
            rpc_errors.clone(),
        );
        let chain_block = Gauge::default();
        r.register(
            "dpor_node_chain_block",
            "The latest block number the chain agent read",
            chain_block.clone(),
        );
        let peers = Gauge::default();
        r.register(
            "dpor_node_connected_peers",
            "libp2p peers with an open connection to the node",
            peers.clone(),
        );
        NodeMetrics {
            registry: r,
            requests,
            request_seconds,
            written_bytes,
            read_bytes,
            rebuild_seconds,
            store_deals,
            stored_blocks,
            stored_bytes,
            disk_used_bytes,
            free_bytes,
            deals,
            epochs_proven,
            epochs_missed,
            epochs_excused,
            disputes_received,
            disputes_answered,
            disputes_lost,
            earned,
            slashed,
            withdrawn,
            owed,
            transactions,
            gas,
            rpc_errors,
            chain_block,
            peers,
            health: Mutex::new(ChainHealth::default()),
            health_max_age,
        }
    }

    /// Counts one answered request of `kind` (a wire request kind, or an owner
    /// operation's kind) and its latency; `ok` false for an error response.
    pub fn request(&self, kind: &'static str, ok: bool, took: Duration) {
        let outcome = if ok { "ok" } else { "error" };
        self.requests
            .get_or_create(&[("kind", kind), ("outcome", outcome)])
            .inc();
        self.request_seconds
            .get_or_create(&[("kind", kind)])
            .observe(took.as_secs_f64());
    }

    /// Counts block bytes accepted from an owner.
    pub fn written(&self, bytes: u64) {
        self.written_bytes.inc_by(bytes);
    }

    /// Counts the block bytes of a response sent (see [`served_bytes`]).
    pub fn served(&self, response: &Response) {
        self.read_bytes.inc_by(served_bytes(response));
    }

    /// Counts one deferred run build (`c`: a C run, else a level) of `took`.
    pub fn rebuilt(&self, c: bool, took: Duration) {
        let run = if c { "c" } else { "level" };
        self.rebuild_seconds
            .get_or_create(&[("run", run)])
            .observe(took.as_secs_f64());
    }

    /// Sets the deals-by-state gauge from the states of this provider's deals.
    pub fn deal_states(&self, states: impl IntoIterator<Item = DealState>) {
        let mut counts = [0i64; DEAL_STATES.len()];
        for s in states {
            if let Some(i) = DEAL_STATES.iter().position(|(d, _)| *d == s) {
                counts[i] += 1;
            }
        }
        for ((_, name), n) in DEAL_STATES.iter().zip(counts) {
            self.deals.get_or_create(&[("state", name)]).set(n);
        }
    }

    /// Counts one settling event of one of this provider's deals.
    pub fn ledger(&self, ev: &LedgerEvent) {
        let earn = |source: &'static str, v: u128| {
            if v > 0 {
                self.earned
                    .get_or_create(&[("source", source)])
                    .inc_by(v as f64);
            }
        };
        let slash = |v: u128| {
            if v > 0 {
                self.slashed.inc_by(v as f64);
            }
        };
        match ev {
            LedgerEvent::EpochProven { payment, .. } => {
                self.epochs_proven.inc();
                earn("epochs", *payment);
            }
            LedgerEvent::EpochMissed { slashed, .. } => {
                self.epochs_missed.inc();
                slash(*slashed);
            }
            LedgerEvent::EpochExcused { .. } => {
                self.epochs_excused.inc();
            }
            LedgerEvent::EpochsClaimed { proven, pay, .. } => {
                self.epochs_proven.inc_by(*proven);
                earn("epochs", *pay);
            }
            LedgerEvent::UploadLockPaid { payment, .. } => earn("upload_lock", *payment),
            LedgerEvent::DisputeOpened { .. } => {
                self.disputes_received
                    .get_or_create(&[("kind", "dispute")])
                    .inc();
            }
            LedgerEvent::DisputeAnswered { bond, .. } => {
                self.disputes_answered
                    .get_or_create(&[("kind", "dispute")])
                    .inc();
                earn("bonds", *bond);
            }
            LedgerEvent::DisputeSlashed { slashed, .. } => {
                self.disputes_lost
                    .get_or_create(&[("kind", "dispute")])
                    .inc();
                slash(*slashed);
            }
            LedgerEvent::ChallengeOpened { .. } => {
                self.disputes_received
                    .get_or_create(&[("kind", "challenge")])
                    .inc();
            }
            LedgerEvent::ChallengeAnswered { pay, bond, .. } => {
                self.disputes_answered
                    .get_or_create(&[("kind", "challenge")])
                    .inc();
                self.epochs_proven.inc();
                earn("epochs", *pay);
                earn("bonds", *bond);
            }
            LedgerEvent::ChallengeFaulted { slashed, .. } => {
                self.disputes_lost
                    .get_or_create(&[("kind", "challenge")])
                    .inc();
                self.epochs_missed.inc();
                slash(*slashed);
            }
            LedgerEvent::DealClosed {
                faulted, slashed, ..
            } => {
                self.epochs_missed.inc_by(*faulted);
                slash(*slashed);
            }
            LedgerEvent::DealTerminated {
                collateral_to_owner,
                ..
            } => slash(*collateral_to_owner),
        }
    }

    /// Counts `amount` base units withdrawn.
    pub fn withdrew(&self, amount: u128) {
        self.withdrawn.inc_by(amount as f64);
    }

    /// Sets the tokens owed now.
    pub fn set_owed(&self, amount: u128) {
        self.owed.set(amount as f64);
    }

    /// A chain poll read block `block`: the chain is reachable.
    pub fn chain_ok(&self, block: u64) {
        self.chain_block
            .set(i64::try_from(block).unwrap_or(i64::MAX));
        let mut h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        h.last_ok = Some(Instant::now());
        h.block = block;
        h.error = None;
    }

    /// A chain poll failed with `error`: the chain is unreachable until a poll succeeds.
    pub fn chain_failed(&self, error: &str) {
        let mut h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        h.error = Some(error.to_string());
    }

    /// Copies the chain client's counters (transactions, gas, RPC errors) into the
    /// exported counters: each gets the difference since the last copy, so the
    /// exported values equal the client's totals.
    fn sync_chain_stats(&self, stats: &dpor_chain::stats::ChainStats) {
        // One family guard at a time: `get_or_create` of a new label set takes the
        // family's write lock, which a guard still held would deadlock.
        let bump = |c: &Counter, total: u64| {
            c.inc_by(total.saturating_sub(c.get()));
        };
        for (method, s) in stats.transactions() {
            bump(
                &self
                    .transactions
                    .get_or_create_owned(&[("method", method), ("outcome", "mined")]),
                s.mined,
            );
            bump(
                &self
                    .transactions
                    .get_or_create_owned(&[("method", method), ("outcome", "failed")]),
                s.failed,
            );
            bump(
                &self.gas.get_or_create_owned(&[("method", method)]),
                s.gas_used,
            );
        }
        self.rpc_errors
            .inc_by(stats.rpc_errors().saturating_sub(self.rpc_errors.get()));
    }

    /// Sets the store gauges from `store` (one walk of its folder for the space).
    fn sync_store(&self, store: &Store) {
        let (mut uploading, mut live, mut damaged, mut blocks, mut bytes) =
            (0i64, 0i64, 0i64, 0u64, 0u64);
        for id in store.deals() {
            let Ok(v) = store.view(id) else { continue };
            match v.phase {
                crate::store::Phase::Uploading { .. } => uploading += 1,
                crate::store::Phase::Live => live += 1,
            }
            if v.damaged.is_some() {
                damaged += 1;
            }
            blocks = blocks.saturating_add(v.params.num_blocks);
            bytes = bytes.saturating_add(
                v.params
                    .num_blocks
                    .saturating_mul(u64::from(v.params.block_bytes)),
            );
        }
        self.store_deals
            .get_or_create(&[("phase", "uploading")])
            .set(uploading);
        self.store_deals
            .get_or_create(&[("phase", "live")])
            .set(live);
        self.store_deals
            .get_or_create(&[("phase", "damaged")])
            .set(damaged);
        self.stored_blocks
            .set(i64::try_from(blocks).unwrap_or(i64::MAX));
        self.stored_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        match store.space() {
            Ok(s) => {
                self.disk_used_bytes
                    .set(i64::try_from(s.used).unwrap_or(i64::MAX));
                self.free_bytes
                    .set(i64::try_from(s.available).unwrap_or(i64::MAX));
            }
            Err(e) => tracing::warn!(error = %e, "metrics: cannot measure the store's space"),
        }
    }

    /// The health report: ok when the store is open and the last chain poll
    /// succeeded no longer than the allowed age ago.
    fn health_report(&self, store_ok: bool) -> (bool, serde_json::Value) {
        let h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        let age = h.last_ok.map(|t| t.elapsed());
        let chain_ok = h.error.is_none() && age.is_some_and(|a| a <= self.health_max_age);
        let ok = store_ok && chain_ok;
        let json = serde_json::json!({
            "status": if ok { "ok" } else { "unavailable" },
            "store": { "open": store_ok },
            "chain": {
                "reachable": chain_ok,
                "block": h.block,
                "last_ok_seconds_ago": age.map(|a| a.as_secs_f64()),
                "error": h.error,
            },
        });
        (ok, json)
    }
}

/// Block bytes in a response: blocks, coded blocks and secret-audit aggregates (the
/// payload, not paths or checksums).
pub fn served_bytes(response: &Response) -> u64 {
    match response {
        Response::Block { block, .. } => block.len() as u64,
        Response::Blocks { blocks, .. } | Response::Coded { blocks, .. } => {
            blocks.iter().map(|b| b.len() as u64).sum()
        }
        Response::Samples { samples, .. } => samples.iter().map(|s| s.block.len() as u64).sum(),
        Response::SecretAudit { runs } => runs.iter().map(|r| r.aggregate.len() as u64).sum(),
        _ => 0,
    }
}

/// Block bytes an owner operation carries inside its op (upload blocks, a write, a
/// write batch); an op signed over block roots carries its blocks outside (counted by
/// the caller from `Signed::blocks`).
pub fn op_block_bytes(op: &OwnerOp) -> u64 {
    match op {
        OwnerOp::UploadBlocks { blocks, .. } => blocks.iter().map(|b| b.len() as u64).sum(),
        OwnerOp::Write { block, .. } => block.len() as u64,
        OwnerOp::WriteBatch { writes } => writes.iter().map(|w| w.block.len() as u64).sum(),
        _ => 0,
    }
}

/// What `/metrics` and `/health` of a running node read: its metrics, store, chain
/// client and libp2p server.
pub struct NodeExporter {
    /// The metrics.
    pub metrics: Arc<NodeMetrics>,
    /// The store.
    pub store: Arc<Store>,
    /// The store's folder (must be a readable folder for `/health` to say ok).
    pub store_dir: PathBuf,
    /// The chain client whose counters are exported (clones share them).
    pub market: Market,
    /// The libp2p server's connected-peer count.
    pub peers: Arc<AtomicUsize>,
}

impl dpor_metrics::Exporter for NodeExporter {
    fn encode(&self) -> Result<String, std::fmt::Error> {
        self.metrics.sync_store(&self.store);
        self.metrics.sync_chain_stats(self.market.stats());
        let peers = self.peers.load(std::sync::atomic::Ordering::Relaxed);
        self.metrics
            .peers
            .set(i64::try_from(peers).unwrap_or(i64::MAX));
        let mut text = String::new();
        encode(&mut text, &self.metrics.registry)?;
        Ok(text)
    }

    fn health(&self) -> Option<(bool, serde_json::Value)> {
        let store_ok = std::fs::metadata(&self.store_dir).is_ok_and(|m| m.is_dir());
        Some(self.metrics.health_report(store_ok))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposition(m: &NodeMetrics) -> dpor_metrics::exposition::Exposition {
        let mut text = String::new();
        encode(&mut text, &m.registry).unwrap();
        dpor_metrics::exposition::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    /// Each ledger event moves the counters it should, by its amounts.
    #[test]
    fn ledger_events_count_epochs_disputes_and_tokens() {
        let m = NodeMetrics::new(Duration::from_secs(60));
        m.ledger(&LedgerEvent::EpochProven {
            deal: 1,
            epoch: 0,
            payment: 8_000,
        });
        m.ledger(&LedgerEvent::EpochProven {
            deal: 1,
            epoch: 1,
            payment: 8_000,
        });
        m.ledger(&LedgerEvent::EpochsClaimed {
            deal: 2,
            proven: 3,
            pay: 300,
        });
        m.ledger(&LedgerEvent::EpochMissed {
            deal: 1,
            epoch: 2,
            slashed: 50,
        });
        m.ledger(&LedgerEvent::DisputeOpened { deal: 1 });
        m.ledger(&LedgerEvent::DisputeAnswered { deal: 1, bond: 7 });
        m.ledger(&LedgerEvent::ChallengeOpened { deal: 2 });
        m.ledger(&LedgerEvent::ChallengeFaulted {
            deal: 2,
            slashed: 5,
        });
        m.deal_states([DealState::Active, DealState::Active, DealState::Completed]);
        m.set_owed(16_307);
        m.withdrew(1_000);
        let e = exposition(&m);
        assert_eq!(e.value("dpor_node_epochs_proven_total", &[]), Some(5.0));
        assert_eq!(e.value("dpor_node_epochs_missed_total", &[]), Some(2.0));
        assert_eq!(
            e.value(
                "dpor_node_tokens_earned_base_units_total",
                &[("source", "epochs")]
            ),
            Some(16_300.0)
        );
        assert_eq!(
            e.value(
                "dpor_node_tokens_earned_base_units_total",
                &[("source", "bonds")]
            ),
            Some(7.0)
        );
        assert_eq!(
            e.value("dpor_node_tokens_slashed_base_units_total", &[]),
            Some(55.0)
        );
        assert_eq!(
            e.value("dpor_node_disputes_received_total", &[("kind", "dispute")]),
            Some(1.0)
        );
        assert_eq!(
            e.value("dpor_node_disputes_answered_total", &[("kind", "dispute")]),
            Some(1.0)
        );
        assert_eq!(
            e.value("dpor_node_disputes_lost_total", &[("kind", "challenge")]),
            Some(1.0)
        );
        assert_eq!(
            e.value("dpor_node_deals", &[("state", "active")]),
            Some(2.0)
        );
        assert_eq!(e.value("dpor_node_deals", &[("state", "open")]), Some(0.0));
        assert_eq!(
            e.value("dpor_node_tokens_owed_base_units", &[]),
            Some(16_307.0)
        );
        assert_eq!(
            e.value("dpor_node_tokens_withdrawn_base_units_total", &[]),
            Some(1_000.0)
        );
    }

    /// Requests count per kind and outcome, with one latency observation each.
    #[test]
    fn requests_and_bytes() {
        let m = NodeMetrics::new(Duration::from_secs(60));
        m.request("read", true, Duration::from_millis(2));
        m.request("read", false, Duration::from_millis(1));
        m.request("write", true, Duration::from_millis(30));
        m.written(4096);
        m.served(&Response::Blocks {
            start: 0,
            blocks: vec![serde_bytes::ByteBuf::from(vec![0u8; 4096]); 3],
        });
        m.rebuilt(true, Duration::from_millis(400));
        let e = exposition(&m);
        assert_eq!(
            e.value(
                "dpor_node_requests_total",
                &[("kind", "read"), ("outcome", "ok")]
            ),
            Some(1.0)
        );
        assert_eq!(
            e.value(
                "dpor_node_requests_total",
                &[("kind", "read"), ("outcome", "error")]
            ),
            Some(1.0)
        );
        assert_eq!(
            e.value(
                "dpor_node_request_duration_seconds_count",
                &[("kind", "read")]
            ),
            Some(2.0)
        );
        assert_eq!(e.value("dpor_node_written_bytes_total", &[]), Some(4096.0));
        assert_eq!(
            e.value("dpor_node_read_bytes_total", &[]),
            Some(3.0 * 4096.0)
        );
        assert_eq!(
            e.value(
                "dpor_node_background_rebuild_duration_seconds_count",
                &[("run", "c")]
            ),
            Some(1.0)
        );
    }

    /// `/health` over HTTP: 503 before any chain poll, 200 after a successful one, 503
    /// again as soon as a poll finds the chain unreachable, and 503 when the store's
    /// folder is gone.
    #[tokio::test]
    async fn health_goes_503_when_the_chain_is_unreachable() {
        struct H(Arc<NodeMetrics>, PathBuf);
        impl dpor_metrics::Exporter for H {
            fn encode(&self) -> Result<String, std::fmt::Error> {
                Ok("# EOF\n".into())
            }
            fn health(&self) -> Option<(bool, serde_json::Value)> {
                Some(self.0.health_report(self.1.is_dir()))
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let m = Arc::new(NodeMetrics::new(Duration::from_secs(60)));
        let srv = dpor_metrics::serve(
            "127.0.0.1:0".parse().unwrap(),
            Arc::new(H(m.clone(), dir.path().to_path_buf())),
        )
        .await
        .unwrap();
        let health = || async {
            dpor_metrics::get(srv.local_addr(), "/health")
                .await
                .unwrap()
        };
        let (code, body) = health().await;
        assert_eq!(code, 503, "no poll yet: {body}");
        m.chain_ok(42);
        let (code, body) = health().await;
        assert_eq!(code, 200, "{body}");
        let j: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (j["status"].as_str(), j["chain"]["block"].as_u64()),
            (Some("ok"), Some(42))
        );
        m.chain_failed("RPC error in eth_blockNumber: connection refused");
        let (code, body) = health().await;
        assert_eq!(code, 503, "{body}");
        let j: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(j["chain"]["reachable"], false);
        assert!(
            j["chain"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("connection refused")),
            "{body}"
        );
        m.chain_ok(43);
        assert_eq!(health().await.0, 200);
        let gone = dir.path().to_path_buf();
        drop(dir);
        assert!(!gone.exists());
        assert_eq!(health().await.0, 503, "store folder gone");
        srv.shutdown().await;
    }

    /// Every node metric is listed in docs/OPERATIONS.md, and every node metric the
    /// Grafana dashboard (docs/grafana-dpor-node.json) reads exists.
    #[test]
    fn docs_and_dashboard_name_exactly_these_metrics() {
        // A family without samples writes no descriptor: give every labelled one a sample.
        let m = NodeMetrics::new(Duration::from_secs(60));
        m.request("read", true, Duration::from_millis(1));
        m.rebuilt(false, Duration::from_millis(1));
        m.store_deals.get_or_create(&[("phase", "live")]).set(1);
        m.deal_states([DealState::Active]);
        m.ledger(&LedgerEvent::DisputeOpened { deal: 1 });
        m.ledger(&LedgerEvent::DisputeAnswered { deal: 1, bond: 1 });
        m.ledger(&LedgerEvent::DisputeSlashed {
            deal: 1,
            slashed: 1,
        });
        let stats = dpor_chain::stats::ChainStats::default();
        stats.record_tx("withdraw", Some(1), true);
        m.sync_chain_stats(&stats);
        let e = exposition(&m);
        let families: Vec<&str> = e.families.keys().map(String::as_str).collect();
        assert_eq!(families.len(), 26, "every registered family: {families:?}");
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let ops = std::fs::read_to_string(root.join("docs/OPERATIONS.md")).unwrap();
        for f in &families {
            let kind = &e.families[*f].kind;
            let shown = if kind == "counter" {
                format!("`{f}_total`")
            } else {
                format!("`{f}`")
            };
            assert!(
                ops.contains(&shown),
                "{shown} is not listed in docs/OPERATIONS.md"
            );
        }
        let dash = std::fs::read_to_string(root.join("docs/grafana-dpor-node.json")).unwrap();
        let _: serde_json::Value = serde_json::from_str(&dash).unwrap();
        let mut read = 0;
        for (i, _) in dash.match_indices("dpor_node_") {
            let name: String = dash[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let base = ["_total", "_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(&name);
            assert!(
                families.contains(&base),
                "the dashboard reads {name}, which the node does not export"
            );
            read += 1;
        }
        assert!(read > 20, "{read}");
    }

    /// The chain client's counters are exported as its totals, again and again (no
    /// double counting), including new label sets met while copying (a regression:
    /// holding one family guard while creating another label set deadlocked `/metrics`).
    #[test]
    fn chain_stats_are_copied_as_totals_without_deadlock() {
        let m = Arc::new(NodeMetrics::new(Duration::from_secs(60)));
        let stats = Arc::new(dpor_chain::stats::ChainStats::default());
        stats.record_tx("submitEpochProof", Some(240_000), true);
        stats.record_tx("submitEpochProof", None, false);
        stats.record_tx("withdraw", Some(40_000), true);
        let (tx, rx) = std::sync::mpsc::channel();
        let (m2, s2) = (m.clone(), stats.clone());
        std::thread::spawn(move || {
            m2.sync_chain_stats(&s2);
            m2.sync_chain_stats(&s2);
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("sync_chain_stats deadlocked");
        let e = exposition(&m);
        let tx_total = |method, outcome| {
            e.value(
                "dpor_node_chain_transactions_total",
                &[("method", method), ("outcome", outcome)],
            )
        };
        assert_eq!(tx_total("submitEpochProof", "mined"), Some(1.0));
        assert_eq!(tx_total("submitEpochProof", "failed"), Some(1.0));
        assert_eq!(tx_total("withdraw", "mined"), Some(1.0));
        assert_eq!(
            e.value(
                "dpor_node_chain_gas_used_total",
                &[("method", "submitEpochProof")]
            ),
            Some(240_000.0)
        );
        assert_eq!(
            e.value("dpor_node_chain_gas_used_total", &[("method", "withdraw")]),
            Some(40_000.0)
        );
    }

    /// A poll older than the allowed age is not "reachable within the last poll".
    #[test]
    fn a_stale_poll_is_unhealthy() {
        let m = NodeMetrics::new(Duration::ZERO);
        m.chain_ok(1);
        std::thread::sleep(Duration::from_millis(5));
        assert!(!m.health_report(true).0);
        let m = NodeMetrics::new(Duration::from_secs(3600));
        m.chain_ok(1);
        assert!(m.health_report(true).0);
        assert!(!m.health_report(false).0);
    }
}
