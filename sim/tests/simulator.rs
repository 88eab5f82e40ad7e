//! The simulator against closed forms (fixed seeds, margins computed from the
//! expected counts), its determinism, and its use of the repair rules.

use dpor_disperse::policy::RepairRules;
use dpor_sim::closed_form;
use dpor_sim::costs::Costs;
use dpor_sim::scenario::YEAR;
use dpor_sim::{simulate, Scenario};

const DAY: u64 = 86_400;

/// Independent failures of one kind on a network big enough that files rarely share
/// two providers: exits (repair a fixed `delay` later) or disk losses (repair at the
/// end of the epoch).
fn independent(k: u16, n: u16, rate: f64, delay: u64, exits: bool) -> Scenario {
    Scenario {
        seed: 11,
        providers: 2_000,
        files: 20_000,
        years: 10.0,
        k,
        n,
        file_bytes: 1 << 20,
        disk_afr: if exits { 0.0 } else { 1.0 - (-rate).exp() },
        exit_rate: if exits { rate } else { 0.0 },
        outage_rate: 0.0,
        region_outage_rate: 0.0,
        region_loss_rate: 0.0,
        cheater_fraction: 0.0,
        epoch_seconds: if exits { DAY } else { delay },
        watch_interval: 60,
        rules: RepairRules { max_faults: 0, unreachable_epochs: 0 },
        costs: Costs { repair_fixed_seconds: if exits { delay as f64 } else { 0.0 }, repair_seconds_per_gib: 0.0, ..Costs::MEASURED },
        ..Scenario::full()
    }
}

/// |observed − expected| within 6 standard deviations of a Poisson count, inflated
/// by the files that share a pair of providers with a given file (whose losses come
/// together): c = 1 + files·C(n,2)/C(P,2).
fn assert_close(observed: f64, expected: f64, sc: &Scenario, what: &str) {
    let pairs = f64::from(sc.providers) * f64::from(sc.providers - 1) / 2.0;
    let c = 1.0 + f64::from(sc.files) * f64::from(sc.n) * f64::from(sc.n - 1) / 2.0 / pairs;
    let margin = 6.0 * (expected * c).sqrt();
    assert!(expected > 50.0, "{what}: expected count {expected} too small to test");
    assert!((observed - expected).abs() <= margin, "{what}: simulated {observed}, closed form {expected:.1} ± {margin:.1}");
}

#[test]
fn losses_with_a_fixed_repair_delay_match_the_binomial_form() {
    for (k, n, rate, days) in [(2u16, 4u16, 0.7, 7u64), (4, 6, 0.7, 14)] {
        let sc = independent(k, n, rate, days * DAY, true);
        let out = simulate(&sc);
        // Delay: the repair time plus half a watch pass on average.
        let delay = (days * DAY) as f64 / YEAR + 30.0 / YEAR;
        let expected = closed_form::independent_loss_rate(k, n, rate, delay) * out.file_years;
        assert_close(out.files_lost as f64, expected, &sc, &format!("{k}-of-{n} exits"));
    }
}

#[test]
fn disk_losses_repaired_at_the_epoch_end_match_the_epoch_aligned_form() {
    for (k, n, rate, days) in [(2u16, 4u16, 0.7, 7u64), (3, 6, 0.9, 14)] {
        let sc = independent(k, n, rate, days * DAY, false);
        let out = simulate(&sc);
        let expected = closed_form::epoch_aligned_loss_rate(k, n, rate, (days * DAY) as f64 / YEAR) * out.file_years;
        assert_close(out.files_lost as f64, expected, &sc, &format!("{k}-of-{n} disk losses"));
        // The same losses are well above the form with the mean delay (n − k ≥ 2):
        // epoch-aligned repairs are correlated, and the simulator shows it.
        let naive = closed_form::independent_loss_rate(k, n, rate, (days * DAY) as f64 / 2.0 / YEAR) * out.file_years;
        assert!(out.files_lost as f64 > naive * 1.15, "{} vs naive {naive}", out.files_lost);
    }
}

#[test]
fn repairs_follow_the_failure_rate() {
    // Every exit repairs each of the provider's shards once: n·files·rate·years.
    let sc = Scenario { files: 5_000, ..independent(4, 6, 0.3, DAY, true) };
    let out = simulate(&sc);
    let expected = f64::from(sc.n) * out.file_years * sc.exit_rate;
    let observed = out.repairs_of_lost_data as f64;
    // One exit moves ~ files·n/P shards at once: a Poisson count of exits times that.
    let per_exit = f64::from(sc.files) * f64::from(sc.n) / f64::from(sc.providers);
    let margin = 6.0 * (expected * per_exit).sqrt();
    assert!((observed - expected).abs() <= margin, "repairs {observed}, expected {expected:.0} ± {margin:.0}");
    assert_eq!(out.repairs[1] + out.repairs[2], 0, "exits end deals: only the deal-ended rule fires");
}

#[test]
fn a_seed_gives_one_run() {
    let sc = Scenario { providers: 300, files: 3_000, years: 2.0, k: 4, n: 8, ..Scenario::full() };
    let a = simulate(&sc);
    assert_eq!(a.unplaced_files, 0);
    let b = simulate(&sc);
    assert_eq!(a, b);
    let c = simulate(&Scenario { seed: 2, ..sc });
    assert_ne!(a.repairs, c.repairs);
}

#[test]
fn the_unreachable_threshold_decides_outage_repairs() {
    let base = Scenario {
        providers: 300,
        files: 2_000,
        years: 2.0,
        k: 4,
        n: 8,
        disk_afr: 0.0,
        exit_rate: 0.0,
        cheater_fraction: 0.0,
        region_loss_rate: 0.0,
        rules: RepairRules { max_faults: 0, unreachable_epochs: 0 },
        ..Scenario::full()
    };
    let at_once = simulate(&base);
    assert!(at_once.repairs[2] > 1_000, "{:?}", at_once.repairs);
    assert_eq!(at_once.repairs_of_lost_data, 0);
    assert_eq!(at_once.files_lost, 0, "outages lose no data");
    // Patient owners (and missed epochs tolerated): outages of hours never move a shard.
    let patient = simulate(&Scenario { rules: RepairRules { max_faults: 1_000, unreachable_epochs: 1_000 }, ..base });
    assert_eq!(patient.repairs, [0, 0, 0]);
}

#[test]
fn a_cheater_that_drops_everything_is_slashed_at_the_epoch_end() {
    let sc = Scenario { providers: 300, files: 2_000, years: 2.0, k: 4, n: 8, cheater_fraction: 0.2, cheat_drop: 1.0, ..Scenario::full() };
    let out = simulate(&sc);
    assert!(out.cheat_delays_hours.len() > 100);
    let bound = (sc.epoch_seconds + sc.watch_interval) as f32 / 3600.0;
    for (slash, done) in &out.cheat_delays_hours {
        // Its next epoch proof fails (probability 1), the owner's next pass repairs.
        assert!(*slash <= bound && done >= slash, "{slash} {done}");
    }
}
