//! Cost of error-and-erasure decoding against erasure-only decoding of one run
//! (issue 10, finding 1): `cargo run --release -p dpor-core --example decode_errors_cost [log_m] [width]`
//! (defaults 2^14 blocks of 587 elements, a 4 KiB-block level; prints a table).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use dpor_core::code;
use dpor_core::decode::{decode_run, decode_run_correcting};
use dpor_core::field::Fp;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let log_m: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(14);
    let width: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(587);
    let m = 1usize << log_m;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let data: Vec<Fp> = (0..m * width).map(|_| Fp::from(rng.gen::<u64>() >> 8)).collect();
    let run = code::c_rebuild(&data, log_m, width).unwrap();
    let mut order: Vec<u64> = (0..2 * m as u64).collect();
    order.shuffle(&mut rng);
    let case = |e: usize, t: usize| -> (f64, bool) {
        let mut damaged = run.clone();
        for &p in &order[..t] {
            damaged[p as usize * width] += Fp::from(1u64);
        }
        let present: Vec<(u64, &[Fp])> = order[..t]
            .iter()
            .chain(&order[t + e..])
            .map(|&p| (p, &damaged[p as usize * width..(p as usize + 1) * width]))
            .collect();
        let start = Instant::now();
        let got = decode_run_correcting(2 * m as u64, width, Fp::from(1u64), &present);
        let secs = start.elapsed().as_secs_f64();
        (secs, got.map(|d| d.data == data && d.corrected.len() == t).unwrap_or(false))
    };
    let erasure_only = {
        let present: Vec<(u64, &[Fp])> = order[m..].iter().map(|&p| (p, &run[p as usize * width..(p as usize + 1) * width])).collect();
        let start = Instant::now();
        let ok = decode_run(2 * m as u64, width, Fp::from(1u64), &present).map(|d| d == data).unwrap_or(false);
        (start.elapsed().as_secs_f64(), ok)
    };
    println!("run of 2^{} coded blocks (m = 2^{log_m}), width {width}", log_m + 1);
    println!("| decoder, blocks present | time | vs erasure-only | correct |\n|---|---|---|---|");
    let base = erasure_only.0;
    println!("| erasure-only `decode_run`, a random half | {:.2} s | 1.00× | {} |", base, erasure_only.1);
    for (label, e, t) in [
        ("correcting, a random half, no wrong block", m, 0),
        ("correcting, all 2m, no wrong block", 0, 0),
        ("correcting, e = m/2 absent, t = m/4 wrong (at the bound)", m / 2, m / 4),
        ("correcting, e = 0, t = m/2 wrong (at the bound, worst locator)", 0, m / 2),
    ] {
        let (s, ok) = case(e, t);
        println!("| {label} | {s:.2} s | {:.2}× | {ok} |", s / base);
    }
}
