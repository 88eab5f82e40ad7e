//! `dpor watch --metrics-listen ADDR`: the watcher's own Prometheus metrics
//! (docs/OPERATIONS.md, "Metrics"), served on `http://ADDR/metrics` while it runs.
//!
//! Counted from the watcher's actions: every action `watch` takes or sees is reported
//! once, by [`super::watch_log::Printer`], as it is logged (one log line per action), so the
//! metrics and the log cannot disagree. One watcher per process: the metrics are
//! process-wide, set up by [`start`].

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

type Label = [(&'static str, &'static str); 1];
type Labels2 = [(&'static str, &'static str); 2];

/// The watcher's metrics.
#[derive(Debug)]
pub struct WatchMetrics {
    registry: Registry,
    deals_watched: Gauge,
    passes: Counter,
    pass_seconds: Histogram,
    checks: Family<Labels2, Counter>,
    disputes_opened: Family<Label, Counter>,
    disputes_won: Family<Label, Counter>,
    disputes_lost: Family<Label, Counter>,
    epochs_marked_missed: Counter,
    repairs: Counter,
    withdrawn: Counter<f64, AtomicU64>,
    errors: Counter,
}

impl Default for WatchMetrics {
    fn default() -> Self {
        let mut r = Registry::default();
        let deals_watched = Gauge::default();
        r.register(
            "dpor_watch_deals_watched",
            "Deals looked at in the last pass",
            deals_watched.clone(),
        );
        let passes = Counter::default();
        r.register(
            "dpor_watch_passes",
            "Passes over the watched deals",
            passes.clone(),
        );
        let pass_seconds = Histogram::new(exponential_buckets(0.01, 2.5, 12));
        r.register(
            "dpor_watch_pass_duration_seconds",
            "Time of one pass, seconds",
            pass_seconds.clone(),
        );
        let checks = Family::<Labels2, Counter>::default();
        r.register(
            "dpor_watch_checks",
            "Checks by kind (audit: a public audit of an epoch; commitment: a committed epoch response) and result (passed, failed, unanswered)",
            checks.clone(),
        );
        let disputes_opened = Family::<Label, Counter>::default();
        r.register("dpor_watch_disputes_opened", "Disputes (kind=dispute) and commitment challenges (kind=challenge) this watcher opened", disputes_opened.clone());
        let disputes_won = Family::<Label, Counter>::default();
        r.register(
            "dpor_watch_disputes_won",
            "Its disputes and challenges left unanswered and slashed or faulted by it",
            disputes_won.clone(),
        );
        let disputes_lost = Family::<Label, Counter>::default();
        r.register(
            "dpor_watch_disputes_lost",
            "Its disputes and challenges the provider answered (bond lost)",
            disputes_lost.clone(),
        );
        let epochs_marked_missed = Counter::default();
        r.register(
            "dpor_watch_epochs_marked_missed",
            "Unproven epochs it marked missed",
            epochs_marked_missed.clone(),
        );
        let repairs = Counter::default();
        r.register(
            "dpor_watch_repairs",
            "Shards of dispersed files it repaired (--repair)",
            repairs.clone(),
        );
        let withdrawn = Counter::<f64, AtomicU64>::default();
        r.register(
            "dpor_watch_tokens_withdrawn_base_units",
            "Tokens it withdrew (bonds back, slash shares), token base units",
            withdrawn.clone(),
        );
        let errors = Counter::default();
        r.register(
            "dpor_watch_errors",
            "Errors of a deal's or a repair's step (retried next pass)",
            errors.clone(),
        );
        WatchMetrics {
            registry: r,
            deals_watched,
            passes,
            pass_seconds,
            checks,
            disputes_opened,
            disputes_won,
            disputes_lost,
            epochs_marked_missed,
            repairs,
            withdrawn,
            errors,
        }
    }
}

impl WatchMetrics {
    /// Counts one logged action (`action` as in the `--json` lines, `extra` its fields).
    pub fn action(&self, action: &str, extra: &serde_json::Value) {
        let check = |kind: &'static str, result: &'static str| {
            self.checks
                .get_or_create(&[("kind", kind), ("result", result)])
                .inc()
        };
        match action {
            "record" => {
                check("audit", "passed");
            }
            "dispute" => {
                check("audit", "failed");
                self.disputes_opened
                    .get_or_create(&[("kind", "dispute")])
                    .inc();
            }
            "audit-unanswered" => {
                check("audit", "unanswered");
            }
            "commitment-ok" => {
                check("commitment", "passed");
            }
            "commitment-unanswered" => {
                check("commitment", "unanswered");
            }
            "challenge" => {
                check("commitment", "failed");
                self.disputes_opened
                    .get_or_create(&[("kind", "challenge")])
                    .inc();
            }
            "slash" => {
                self.disputes_won
                    .get_or_create(&[("kind", "dispute")])
                    .inc();
            }
            "challenge-faulted" => {
                self.disputes_won
                    .get_or_create(&[("kind", "challenge")])
                    .inc();
            }
            "dispute-answered" => {
                self.disputes_lost
                    .get_or_create(&[("kind", "dispute")])
                    .inc();
            }
            "challenge-answered" => {
                self.disputes_lost
                    .get_or_create(&[("kind", "challenge")])
                    .inc();
            }
            "mark-missed" => {
                self.epochs_marked_missed.inc();
            }
            "repair" => {
                self.repairs
                    .inc_by(extra["repaired"].as_array().map_or(0, |r| r.len() as u64));
            }
            "withdraw" => {
                let amount = extra["amount"]
                    .as_str()
                    .and_then(|a| a.parse::<u128>().ok())
                    .unwrap_or(0);
                self.withdrawn.inc_by(amount as f64);
            }
            "error" => {
                self.errors.inc();
            }
            "pass" => {
                self.passes.inc();
                self.deals_watched.set(extra["deals"].as_i64().unwrap_or(0));
                self.pass_seconds
                    .observe(extra["seconds"].as_f64().unwrap_or(0.0));
            }
            _ => {}
        }
    }
}

static METRICS: OnceLock<Arc<WatchMetrics>> = OnceLock::new();

/// The process's watch metrics, if [`start`] was called.
pub fn get() -> Option<&'static Arc<WatchMetrics>> {
    METRICS.get()
}

struct Exporter(Arc<WatchMetrics>);

impl dpor_metrics::Exporter for Exporter {
    fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        encode(&mut text, &self.0.registry)?;
        Ok(text)
    }
}

/// Sets up the metrics and serves them on `addr` (e.g. `127.0.0.1:9465`; port 0 for
/// any) until the returned server is dropped. Errors: the address cannot be bound.
pub async fn start(addr: std::net::SocketAddr) -> anyhow::Result<dpor_metrics::MetricsServer> {
    let m = METRICS
        .get_or_init(|| Arc::new(WatchMetrics::default()))
        .clone();
    Ok(dpor_metrics::serve(addr, Arc::new(Exporter(m))).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each action moves its counter; the text parses strictly.
    #[test]
    fn actions_are_counted() {
        let m = WatchMetrics::default();
        m.action("record", &json!({}));
        m.action("record", &json!({}));
        m.action("dispute", &json!({}));
        m.action("slash", &json!({}));
        m.action("challenge-answered", &json!({}));
        m.action("repair", &json!({"repaired": [1, 2]}));
        m.action("withdraw", &json!({"amount": "1000"}));
        m.action("pass", &json!({"deals": 3, "seconds": 0.25}));
        let mut text = String::new();
        encode(&mut text, &m.registry).unwrap();
        let e = dpor_metrics::exposition::parse(&text).unwrap();
        assert_eq!(
            e.value(
                "dpor_watch_checks_total",
                &[("kind", "audit"), ("result", "passed")]
            ),
            Some(2.0)
        );
        assert_eq!(
            e.value(
                "dpor_watch_checks_total",
                &[("kind", "audit"), ("result", "failed")]
            ),
            Some(1.0)
        );
        assert_eq!(
            e.value("dpor_watch_disputes_opened_total", &[("kind", "dispute")]),
            Some(1.0)
        );
        assert_eq!(
            e.value("dpor_watch_disputes_won_total", &[("kind", "dispute")]),
            Some(1.0)
        );
        assert_eq!(
            e.value("dpor_watch_disputes_lost_total", &[("kind", "challenge")]),
            Some(1.0)
        );
        assert_eq!(e.value("dpor_watch_repairs_total", &[]), Some(2.0));
        assert_eq!(
            e.value("dpor_watch_tokens_withdrawn_base_units_total", &[]),
            Some(1000.0)
        );
        assert_eq!(e.value("dpor_watch_deals_watched", &[]), Some(3.0));
        assert_eq!(e.value("dpor_watch_passes_total", &[]), Some(1.0));
    }
}
