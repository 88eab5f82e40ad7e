//! `dpor-sim --sweep DIR`: the smaller runs and closed forms behind docs/SIMULATION.md's
//! tables (Markdown on stdout) and plots (SVG in DIR).

use dpor_sim::closed_form;
use dpor_sim::costs::{Costs, MAINNET_GAS_PER_DAY};
use dpor_sim::plot::{line_chart, Series};
use dpor_sim::report::{estimate_per_file_year, Summary};
use dpor_sim::scenario::YEAR;
use dpor_sim::{simulate, Scenario};
use std::path::Path;

/// The sweeps' network: 1,000 providers, 100,000 files of 1 GiB, 10 years.
fn small() -> Scenario {
    Scenario { providers: 1_000, files: 100_000, ..Scenario::full() }
}

/// Independent failures only, frequent enough to observe losses: disk losses
/// (repaired at the end of the epoch they happen in) or, with `exits`, provider exits
/// (repaired a fixed `epoch_or_delay` seconds later: the watch pass is 60 s, the repair
/// time is set to the delay).
pub fn independent(k: u16, n: u16, rate: f64, epoch_or_delay: u64, exits: bool, files: u32, seed: u64) -> Scenario {
    let repair = if exits { epoch_or_delay as f64 } else { 0.0 };
    Scenario {
        seed,
        providers: 2_000,
        files,
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
        epoch_seconds: if exits { 86_400 } else { epoch_or_delay },
        watch_interval: 60,
        rules: dpor_disperse::policy::RepairRules { max_faults: 0, unreachable_epochs: 0 },
        costs: Costs { repair_fixed_seconds: repair, repair_seconds_per_gib: 0.0, ..Costs::MEASURED },
        ..Scenario::full()
    }
}

/// The closed-form loss rate per file-year of an [`independent`] scenario.
pub fn independent_expected(sc: &Scenario) -> f64 {
    let watch = sc.watch_interval as f64 / 2.0 / YEAR;
    if sc.exit_rate > 0.0 {
        closed_form::independent_loss_rate(sc.k, sc.n, sc.exit_rate, sc.costs.repair_fixed_seconds / YEAR + watch)
    } else {
        let rate = -(1.0 - sc.disk_afr).ln();
        closed_form::epoch_aligned_loss_rate(sc.k, sc.n, rate, sc.epoch_seconds as f64 / YEAR)
    }
}

fn nines(loss_per_file_year: f64) -> f64 {
    if loss_per_file_year <= 0.0 {
        f64::INFINITY
    } else {
        -loss_per_file_year.log10()
    }
}

/// Runs every sweep.
pub fn run(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;

    // 1. The simulator against the closed form (independent failures).
    println!("### Check: simulation against the closed form (independent failures)\n");
    println!("2,000 providers, 20,000 files, 10 years, only one kind of failure. Exits: repaired a fixed delay later (binomial form). Disk losses: repaired at the end of the epoch (epoch-aligned form).\n");
    println!("| k-of-n | failure | rate per year | repair | file-years | files lost (sim) | expected (closed form) | sim / closed form |");
    println!("|---|---|---:|---|---:|---:|---:|---:|");
    let mut check: Vec<(f64, f64)> = Vec::new();
    let day = 86_400;
    for (k, n, rate, d, exits) in [
        (1u16, 2u16, 0.7, 7 * day, true),
        (2, 4, 0.7, 7 * day, true),
        (3, 6, 0.9, 14 * day, true),
        (4, 6, 0.7, 14 * day, true),
        (1, 2, 0.7, 7 * day, false),
        (2, 4, 0.7, 7 * day, false),
        (3, 6, 0.9, 14 * day, false),
        (4, 6, 0.7, 14 * day, false),
    ] {
        let sc = independent(k, n, rate, d, exits, 20_000, 7);
        let out = simulate(&sc);
        let exp = independent_expected(&sc) * out.file_years;
        println!(
            "| {k}-of-{n} | {} | {rate} | {} | {:.0} | {} | {:.1} | {:.2} |",
            if exits { "exit" } else { "disk loss" },
            if exits { format!("{} d after", d / day) } else { format!("end of {}-day epoch", d / day) },
            out.file_years,
            out.files_lost,
            exp,
            out.files_lost as f64 / exp
        );
        if out.files_lost > 0 {
            check.push((exp, out.files_lost as f64));
        }
    }
    let (lo, hi) = check.iter().fold((f64::MAX, 0.0f64), |(l, h), (e, _)| (l.min(*e), h.max(*e)));
    line_chart(
        &dir.join("check.svg"),
        "Files lost: simulation against the closed form",
        "expected (closed form)",
        "simulated",
        true,
        true,
        &[("simulated".into(), check.clone()), ("y = x".into(), vec![(lo, lo), (hi, hi)])],
    )?;

    // 2. Durability, repairs and bandwidth against k-of-n and the repair threshold.
    println!("\n### Durability and repair traffic against k-of-n and the unreachable threshold\n");
    println!("1,000 providers, 100,000 files of 1 GiB, 10 years, the default failure model; domain losses at 10x the default rate (0.02 per domain-year) so that some losses are observable.\n");
    println!("| k-of-n | overhead | unreachable_epochs | files lost per million per year (sim) | closed form | repairs per file-year | repair TB per TB-year |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut bw: Vec<Series> = Vec::new();
    for (k, n) in [(2u16, 3u16), (4, 6), (8, 12), (10, 16), (12, 24), (16, 32)] {
        let mut pts = Vec::new();
        for ue in [0u64, 1, 3] {
            let mut sc = small();
            sc.k = k;
            sc.n = n;
            sc.rules.unreachable_epochs = ue;
            sc.region_loss_rate = 0.02;
            let out = simulate(&sc);
            let s = Summary::new(&sc, &out);
            println!(
                "| {k}-of-{n} | {:.2} | {ue} | {:.2} | {:.3e} | {:.3} | {:.3} |",
                s.storage_overhead, s.lost_per_million_year, s.estimate_per_million_year, s.repairs_per_file_year, s.repair_tb_per_tb_year
            );
            pts.push((ue as f64, s.repair_tb_per_tb_year));
        }
        bw.push((format!("{k}-of-{n}"), pts));
    }
    line_chart(
        &dir.join("repair_bandwidth.svg"),
        "Repair traffic per TB of file data",
        "unreachable_epochs (repair threshold)",
        "TB moved per TB stored per year",
        false,
        false,
        &bw,
    )?;

    // 3. Closed-form durability over k-of-n (the figures eleven nines needs).
    println!("\n### Annual durability (closed form) of the default model, by k-of-n\n");
    println!("Nines = −log10(files lost per file-year). Domain losses at the default 0.002 per domain-year and at 10x and 50x that.\n");
    println!("| k-of-n | storage overhead | nines (0.002) | nines (0.02) | nines (0.1) |");
    println!("|---|---:|---:|---:|---:|");
    let mut dur: Vec<Series> = Vec::new();
    for ratio in [(1u16, 2u16), (2, 3), (3, 4)] {
        let mut pts = Vec::new();
        for n in (6..=48).step_by(6) {
            let k = n * ratio.0 / ratio.1;
            let mut row = Vec::new();
            for rl in [0.002, 0.02, 0.1] {
                let sc = Scenario { k, n, region_loss_rate: rl, ..Scenario::full() };
                row.push(estimate_per_file_year(&sc));
            }
            let sc = Scenario { k, n, ..Scenario::full() };
            println!(
                "| {k}-of-{n} | {:.2} | {:.1} | {:.1} | {:.1} |",
                sc.costs.storage_overhead(k, n),
                nines(row[0]).min(99.0),
                nines(row[1]).min(99.0),
                nines(row[2]).min(99.0)
            );
            pts.push((f64::from(n), (row[1] * 1e6).max(1e-30)));
        }
        dur.push((format!("k = {}n/{} (domain losses 0.02/yr)", ratio.0, ratio.1), pts));
    }
    dur.push(("eleven nines".into(), vec![(6.0, 1e-5), (48.0, 1e-5)]));
    line_chart(
        &dir.join("durability.svg"),
        "Files lost per million per year (closed form)",
        "n (shards)",
        "files lost per million per year",
        false,
        true,
        &dur,
    )?;

    // 4. Chain gas per day against the chain's capacity.
    println!("\n### Chain gas per day against mainnet's capacity ({:.2e} gas/day)\n", MAINNET_GAS_PER_DAY);
    println!("12-of-24, 1-day epochs, 100 files per provider; renewals: every deal renewed at the end of its 100-epoch term (openDeal + acceptDeal + postDigest + claimEpochs).\n");
    println!("| files | providers | per-deal proofs (gas/day) | x capacity | epoch commitments (gas/day) | x capacity | renewals (gas/day) | x capacity |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let c = Costs::MEASURED;
    let mut proofs = Vec::new();
    let mut commits = Vec::new();
    let mut renewals = Vec::new();
    for files in [1e4, 1e5, 1e6, 1e7] {
        let providers = files / 100.0;
        let deals = files * 24.0;
        let p = deals * c.epoch_proof_gas as f64;
        let m = providers * c.epoch_commitment_gas as f64;
        let r = deals / 100.0 * (c.new_deal_gas() + c.claim_epochs_gas) as f64;
        let x = |g: f64| g / MAINNET_GAS_PER_DAY;
        println!("| {files:.0} | {providers:.0} | {p:.3e} | {:.3} | {m:.3e} | {:.5} | {r:.3e} | {:.4} |", x(p), x(m), x(r));
        proofs.push((files, p));
        commits.push((files, m));
        renewals.push((files, r));
    }
    let capline = vec![(1e4, MAINNET_GAS_PER_DAY), (1e7, MAINNET_GAS_PER_DAY)];
    line_chart(
        &dir.join("gas.svg"),
        "Chain gas per day, 12-of-24 files, 1-day epochs",
        "files (100 per provider)",
        "gas per day",
        true,
        true,
        &[
            ("per-deal epoch proofs".into(), proofs),
            ("epoch commitments".into(), commits),
            ("deal renewals (100-epoch terms)".into(), renewals),
            ("mainnet capacity".into(), capline),
        ],
    )?;

    // 5. Cheaters: detection against the proof samples.
    println!("\n### Cheaters: from data drop to slashing and repair (simulated, 1,000 providers, 100,000 files, 10 % cheaters)\n");
    println!("| dropped fraction f | K | P(epoch proof fails) | shards found | to slashing, median h | p90 h | to repaired shard, median h | p90 h |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (f, kk) in [(1.0, 1u32), (0.5, 1), (0.1, 1), (0.1, 4), (0.01, 1)] {
        let sc = Scenario { cheater_fraction: 0.1, cheat_drop: f, proof_samples: kk, years: 3.0, ..small() };
        let out = simulate(&sc);
        let s = Summary::new(&sc, &out);
        println!(
            "| {f} | {kk} | {:.3} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
            sc.detection_per_epoch(),
            s.cheat_shards,
            s.cheat_hours[0],
            s.cheat_hours[1],
            s.cheat_hours[2],
            s.cheat_hours[3]
        );
    }
    Ok(())
}
