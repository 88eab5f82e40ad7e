//! `script/bench` core figures: each measured against a baseline run in the same
//! process (DESIGN §12, issue "foundation" §4). Prints a Markdown section and, if
//! `DPOR_BENCH_OUT` is set, writes it to that file.
//!
//! Figures are best-of-r wall times on one thread (a one-thread rayon pool), then the
//! parallel parts on two threads against one (issue 11: C-rebuild on 2 threads vs 1),
//! and the keccak backends (alloy's default `sha3` against `keccak-asm`). Set
//! `DPOR_BENCH_QUICK=1` for a smaller run (levels up to 2^12, a 16 MiB file) when
//! checking that it works; `DPOR_BENCH_ONLY=parallel` runs only the last two sections.

use alloy_primitives::keccak256;
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use dpor_core::block::BlockFormat;
use dpor_core::code::{self, bit_reverse, mix, y_scale};
use dpor_core::decode::decode_run;
use dpor_core::extract::extract;
use dpor_core::field::Fp;
use dpor_core::merkle;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

const MIB: f64 = 1024.0 * 1024.0;

fn best<T>(reps: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..reps.max(1) {
        let start = Instant::now();
        let v = f();
        best = best.min(start.elapsed());
        out = Some(v);
    }
    match out {
        Some(v) => (best, v),
        None => unreachable!("reps ≥ 1"),
    }
}

fn mbps(bytes: f64, d: Duration) -> f64 {
    bytes / MIB / d.as_secs_f64()
}

fn random_records(rng: &mut ChaCha20Rng, format: &BlockFormat, blocks: usize) -> Vec<Fp> {
    let mut out = Vec::with_capacity(blocks * format.width());
    let mut b = vec![0u8; format.block_bytes()];
    for i in 0..blocks {
        rng.fill(&mut b[..]);
        format.push_record(i as u64, &b, &mut out).unwrap_or_default();
    }
    out
}

/// ark-poly's FFT of each column of `blocks` (bit-reversed coefficient order, as the
/// code uses), evaluated on `eval_size` points: the baseline for the code's transforms.
fn ark_fft_columns(blocks: &[Fp], width: usize, eval_size: usize) -> Vec<Fp> {
    let n = blocks.len() / width;
    let log_n = n.trailing_zeros();
    let Some(domain) = Radix2EvaluationDomain::<Fp>::new(eval_size) else { return Vec::new() };
    let mut col = vec![Fp::from(0u64); eval_size];
    let mut checksum = Vec::with_capacity(width);
    for c in 0..width {
        col.iter_mut().for_each(|x| *x = Fp::from(0u64));
        for r in 0..n {
            col[bit_reverse(r as u64, log_n) as usize] = blocks[r * width + c];
        }
        domain.fft_in_place(&mut col);
        checksum.push(col[1]);
    }
    checksum
}

fn main() {
    let quick = std::env::var("DPOR_BENCH_QUICK").is_ok();
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let format = BlockFormat::default();
    let w = format.width();
    let mut md = String::new();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let date = std::process::Command::new("date").arg("-u").arg("+%Y-%m-%d").output().ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()).unwrap_or_default();
    let _ = writeln!(md, "Machine: {cores} cores ({cpu}), single-threaded figures unless a table says otherwise, measured {}.", date.trim());
    let _ = writeln!(md, "Block size β = 4096 bytes (s = {w} elements); MB/s count input data bytes (β per block), MiB = 2^20 bytes.\n");
    let pool = |threads: usize| match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) => p,
        Err(e) => panic!("bench setup: a {threads}-thread pool: {e}"),
    };
    let (pool1, pool2) = (pool(1), pool(2));
    let only_parallel = std::env::var("DPOR_BENCH_ONLY").is_ok_and(|v| v == "parallel");
    if !only_parallel {
        pool1.install(|| single_threaded(&mut md, quick, &mut rng, &format));
    }
    parallel(&mut md, quick, &mut rng, &format, &pool1, &pool2);
    keccak_backends(&mut md, quick, &mut rng);
    pool1.install(|| keccak_lanes(&mut md, quick, &mut rng));

    print!("{md}");
    if let Ok(path) = std::env::var("DPOR_BENCH_OUT") {
        if let Err(e) = std::fs::write(&path, &md) {
            eprintln!("cannot write {path}: {e}");
        }
    }
}

/// The single-threaded figures (run inside a one-thread pool).
fn single_threaded(md: &mut String, quick: bool, rng: &mut ChaCha20Rng, format: &BlockFormat) {
    let format = *format;
    let w = format.width();
    let beta = format.block_bytes() as f64;

    // --- mix and whole-level encode vs ark-poly FFT ---------------------------------
    let max_log = if quick { 12 } else { 16 };
    let _ = writeln!(*md, "### `mix` and level encoding\n");
    let _ = writeln!(*md, "| level (blocks) | data | `mix` MB/s | encode level MB/s | ark-poly FFT MB/s | encode / FFT |");
    let _ = writeln!(*md, "|---|---|---|---|---|---|");
    for log in (6..=max_log).step_by(2) {
        let blocks = 1usize << log;
        let data = random_records(rng, &format, blocks);
        let reps = if log <= 10 { 5 } else { 2 };
        let mut buf = data.clone();
        let (t_mix, _) = best(reps, || mix(&mut buf, w));
        let (t_enc, _) = best(reps, || code::c_rebuild(&data, log, w).map(|c| c.len()));
        let (t_fft, _) = best(reps.min(2), || ark_fft_columns(&data, w, 2 * blocks).len());
        let bytes = blocks as f64 * beta;
        let _ = writeln!(*md, "| 2^{log} | {:.0} MiB | {:.0} | {:.0} | {:.0} | {:.2}× |", bytes / MIB,
            mbps(bytes, t_mix), mbps(bytes, t_enc), mbps(bytes, t_fft), t_fft.as_secs_f64() / t_enc.as_secs_f64());
        eprintln!("level 2^{log} done");
    }
    let _ = writeln!(*md, "\n`mix` is one butterfly stage over the level (its input is the two halves A0, A1);\n\
        \"encode level\" is the whole transform of a level from its blocks (X and Y halves: what\n\
        HRebuild amounts to over a level's lifetime, and CRebuild at the top), against\n\
        ark-poly's radix-2 FFT of the same columns onto the same 2m points.\n");

    // --- C-rebuild of a file ----------------------------------------------------------
    let file_log = if quick { 12 } else { 16 };
    let n = 1usize << file_log;
    let u = random_records(rng, &format, n);
    let (t_c, c) = best(1, || code::c_rebuild(&u, file_log, w).unwrap_or_default());
    let (t_cf, _) = best(1, || ark_fft_columns(&u, w, 2 * n).len());
    let _ = writeln!(*md, "### C-rebuild\n\n| file | CRebuild | ark-poly FFT of the same columns | ratio |\n|---|---|---|---|");
    let _ = writeln!(*md, "| {:.0} MiB (2^{file_log} blocks) | {:.2} s | {:.2} s | {:.2}× |\n", n as f64 * beta / MIB,
        t_c.as_secs_f64(), t_cf.as_secs_f64(), t_cf.as_secs_f64() / t_c.as_secs_f64());
    eprintln!("C-rebuild done");

    // --- keccak Merkle tree over the coded file ----------------------------------------
    let coded_bytes: Vec<Vec<u8>> = c.chunks_exact(w).take(n).map(|b| format.coded_to_bytes(b).unwrap_or_default()).collect();
    let total: usize = coded_bytes.iter().map(|b| b.len()).sum();
    let (t_tree, _) = best(1, || merkle::run_tree(&coded_bytes).map(|t| t.root()));
    let (t_raw, _) = best(1, || coded_bytes.iter().map(|b| keccak256(b)[0]).fold(0u8, |a, x| a ^ x));
    let _ = writeln!(*md, "### keccak Merkle tree\n\n| input | tree (chunk trees + run tree) | raw keccak256 of each block | ratio |\n|---|---|---|---|");
    let _ = writeln!(*md, "| {:.0} MiB of coded blocks | {:.0} MB/s | {:.0} MB/s | {:.2}× |\n", total as f64 / MIB,
        mbps(total as f64, t_tree), mbps(total as f64, t_raw), t_raw.as_secs_f64() / t_tree.as_secs_f64());
    eprintln!("Merkle done");
    drop(coded_bytes);

    // --- decoding a half-erased level ---------------------------------------------------
    let dec_log = if quick { 12 } else { 16 };
    let m = 1usize << dec_log;
    let data = random_records(rng, &format, m);
    let run = code::c_rebuild(&data, dec_log, w).unwrap_or_default();
    let mut keep: Vec<u64> = (0..2 * m as u64).collect();
    for i in (1..keep.len()).rev() {
        keep.swap(i, rng.gen_range(0..=i));
    }
    keep.truncate(m);
    let present: Vec<(u64, &[Fp])> = keep.iter().map(|&p| (p, &run[p as usize * w..(p as usize + 1) * w])).collect();
    let (t_dec, got) = best(1, || decode_run(2 * m as u64, w, Fp::from(1u64), &present));
    let ok = got.map(|g| g == data).unwrap_or(false);
    let (t_enc, _) = best(1, || code::c_rebuild(&data, dec_log, w).map(|c| c.len()));
    let _ = writeln!(*md, "### Decoding and extraction\n\n| what | time | baseline (encode of the same level) | ratio | correct |\n|---|---|---|---|---|");
    let _ = writeln!(*md, "| decode a 2^{dec_log}-block level from a random half ({:.0} MiB) | {:.2} s | {:.2} s | {:.1}× | {ok} |",
        m as f64 * beta / MIB, t_dec.as_secs_f64(), t_enc.as_secs_f64(), t_dec.as_secs_f64() / t_enc.as_secs_f64());
    eprintln!("decode done");
    drop(run);

    // --- extraction of a file from half-erased C and levels -----------------------------
    let ext_log = if quick { 10 } else { 14 };
    let n = 1usize << ext_log;
    let blocks: Vec<Vec<u8>> = (0..n).map(|_| (0..format.block_bytes()).map(|_| rng.gen()).collect()).collect();
    let mut state = match dpor_core::state::ServerState::new(format, blocks) {
        Ok(s) => s,
        Err(e) => panic!("bench setup: {e}"),
    };
    // t = 2^(k-1) + 2^(k-2) - 1 writes: levels 0..k-3 and k-2, k-1 partly: many levels filled.
    let writes = (n / 2 + n / 4 - 1) as u64;
    for i in 0..writes {
        let b: Vec<u8> = (0..format.block_bytes()).map(|_| rng.gen()).collect();
        if let Err(e) = state.write((i * 7919) % n as u64, b) {
            panic!("bench setup: {e}");
        }
    }
    let half = |size: u64, rng: &mut ChaCha20Rng| -> Vec<u64> {
        let mut p: Vec<u64> = (0..size).collect();
        for i in (1..p.len()).rev() {
            p.swap(i, rng.gen_range(0..=i));
        }
        p.truncate(size as usize / 2);
        p
    };
    let c_keep = half(2 * n as u64, rng);
    let c_present: Vec<(u64, &[Fp])> = c_keep.iter().map(|&p| (p, &state.c().blocks[p as usize * w..(p as usize + 1) * w])).collect();
    let mut levels = Vec::new();
    for l in 0..ext_log {
        if let Ok(Some(run)) = state.level(l) {
            let k = half(run.size(w), rng);
            levels.push((l, k.iter().map(|&p| (p, &run.blocks[p as usize * w..(p as usize + 1) * w])).collect::<Vec<_>>()));
        }
    }
    let (t_ext, got) = best(1, || extract(&format, ext_log, state.write_count(), &c_present, &levels));
    let ok = got.map(|g| g.as_slice() == state.u()).unwrap_or(false);
    let (t_enc, _) = best(1, || code::c_rebuild(&dpor_core::state::u_records(&format, state.u()).unwrap_or_default(), ext_log, w).map(|c| c.len()));
    let _ = writeln!(*md, "| extract a {:.0} MiB file from half of C and half of each of its {} levels | {:.2} s | {:.2} s | {:.1}× | {ok} |\n",
        n as f64 * beta / MIB, levels.len(), t_ext.as_secs_f64(), t_enc.as_secs_f64(), t_ext.as_secs_f64() / t_enc.as_secs_f64());
    let _ = y_scale(0, 1);
    eprintln!("extract done");
}

/// CPU seconds (user + system) from a stat(5) line (clock ticks of 1/100 s, Linux's
/// USER_HZ); 0 where unreadable.
fn stat_cpu_seconds(stat: &str) -> f64 {
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0 // utime, stime: fields 14 and 15 of stat(5)
}

/// CPU seconds this process has used so far (/proc/self/stat).
fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat").map(|s| stat_cpu_seconds(&s)).unwrap_or(0.0)
}

/// CPU seconds used so far by each thread of this process (/proc/self/task/*/stat).
fn thread_cpu_seconds() -> std::collections::HashMap<String, f64> {
    let mut out = std::collections::HashMap::new();
    if let Ok(rd) = std::fs::read_dir("/proc/self/task") {
        for e in rd.flatten() {
            if let Ok(s) = std::fs::read_to_string(e.path().join("stat")) {
                out.insert(e.file_name().to_string_lossy().into_owned(), stat_cpu_seconds(&s));
            }
        }
    }
    out
}

/// The 1-minute load average, from /proc/loadavg.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg").ok().and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok())).unwrap_or(0.0)
}

/// What [`timed_in`] measured besides the time.
#[derive(Clone, Copy)]
struct Usage {
    /// Cores the process got: its CPU time over wall time.
    cores: f64,
    /// Total CPU time of all threads over the busiest thread's: the speed-up the work's
    /// split allows when every thread has a core of its own (1 on one thread).
    balance: f64,
}

/// Best-of-`reps` time of `f` inside `pool`, and the [`Usage`] over all repetitions.
fn timed_in<T: Send>(pool: &rayon::ThreadPool, reps: usize, f: impl Fn() -> T + Sync) -> (Duration, T, Usage) {
    let (cpu0, threads0, wall0) = (cpu_seconds(), thread_cpu_seconds(), Instant::now());
    let (t, v) = pool.install(|| best(reps, &f));
    let cores = (cpu_seconds() - cpu0) / wall0.elapsed().as_secs_f64().max(1e-9);
    let deltas: Vec<f64> =
        thread_cpu_seconds().into_iter().map(|(tid, s)| s - threads0.get(&tid).copied().unwrap_or(0.0)).collect();
    let work: f64 = deltas.iter().sum();
    let span = deltas.iter().copied().fold(0.0, f64::max);
    (t, v, Usage { cores, balance: if span > 0.0 { work / span } else { 1.0 } })
}

/// Issue 11's figure: the rayon-parallel parts on two threads against one, on the same
/// data in the same run, results compared for equality.
fn parallel(md: &mut String, quick: bool, rng: &mut ChaCha20Rng, format: &BlockFormat, pool1: &rayon::ThreadPool, pool2: &rayon::ThreadPool) {
    let w = format.width();
    let beta = format.block_bytes() as f64;
    let _ = writeln!(*md, "### Two threads against one (rayon)\n");
    let _ = writeln!(*md, "Load average before: {:.1} on {} cores. \"cores got\" is the process's CPU time over wall time during the runs: \
        with other work on the machine a second thread may get no second core, and then the wall-time speed-up shows the machine. \
        \"split\" is the 2-thread run's total CPU time over its busiest thread's (ideal 2.00): the speed-up the work's division allows \
        when each thread has a core (memory bandwidth aside), measured from per-thread CPU clocks (/proc, 10 ms ticks).\n",
        load_average(), std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    let _ = writeln!(*md, "| work | 1 thread | 2 threads | wall-time speed-up | cores got (1 / 2 threads) | split (2 threads) | same result |\n|---|---|---|---|---|---|---|");
    let row = |md: &mut String, what: String, a: (Duration, Usage), b: (Duration, Usage), same: bool| {
        let _ = writeln!(*md, "| {what} | {:.2} s | {:.2} s | **{:.2}×** | {:.2} / {:.2} | {:.2} | {same} |",
            a.0.as_secs_f64(), b.0.as_secs_f64(), a.0.as_secs_f64() / b.0.as_secs_f64(), a.1.cores, b.1.cores, b.1.balance);
    };
    let file_log = if quick { 12 } else { 16 };
    let n = 1usize << file_log;
    let u = random_records(rng, format, n);
    let (t1, c1, k1) = timed_in(pool1, 2, || code::c_rebuild(&u, file_log, w).unwrap_or_default());
    let (t2, c2, k2) = timed_in(pool2, 2, || code::c_rebuild(&u, file_log, w).unwrap_or_default());
    row(md, format!("C-rebuild of {:.0} MiB (2^{file_log} blocks)", n as f64 * beta / MIB), (t1, k1), (t2, k2), c1 == c2);
    eprintln!("parallel C-rebuild done");
    drop(c2);
    let coded: Vec<Vec<u8>> = c1.chunks_exact(w).map(|b| format.coded_to_bytes(b).unwrap_or_default()).collect();
    let total: usize = coded.iter().map(|b| b.len()).sum();
    let (t1, r1, k1) = timed_in(pool1, 1, || merkle::run_tree(&coded).map(|t| t.root()).unwrap_or_default());
    let (t2, r2, k2) = timed_in(pool2, 1, || merkle::run_tree(&coded).map(|t| t.root()).unwrap_or_default());
    row(md, format!("chunk trees + run tree of C ({:.0} MiB of coded blocks)", total as f64 / MIB), (t1, k1), (t2, k2), r1 == r2);
    eprintln!("parallel Merkle done");
    drop(coded);
    // Decoding C from a random half of its blocks.
    let mut keep: Vec<u64> = (0..2 * n as u64).collect();
    for i in (1..keep.len()).rev() {
        keep.swap(i, rng.gen_range(0..=i));
    }
    keep.truncate(n);
    let present: Vec<(u64, &[Fp])> = keep.iter().map(|&p| (p, &c1[p as usize * w..(p as usize + 1) * w])).collect();
    let (t1, d1, k1) = timed_in(pool1, 1, || decode_run(2 * n as u64, w, Fp::from(1u64), &present).unwrap_or_default());
    let (t2, d2, k2) = timed_in(pool2, 1, || decode_run(2 * n as u64, w, Fp::from(1u64), &present).unwrap_or_default());
    row(md, format!("decode C from a random half ({:.0} MiB of data)", n as f64 * beta / MIB), (t1, k1), (t2, k2), d1 == d2 && d1 == u);
    let _ = writeln!(*md, "\nLoad average after: {:.1}.\n", load_average());
    eprintln!("parallel decode done");
}

/// Block roots of coded blocks with the keccak lanes (`dpor_keccak`, eight or four
/// hashes per permutation) against one hash at a time with `keccak-asm` (alloy's
/// `keccak256` as built), on one thread. Prints `figure keccak_lanes_speedup X`.
fn keccak_lanes(md: &mut String, quick: bool, rng: &mut ChaCha20Rng) {
    let blocks_n = if quick { 2048 } else { 8192 };
    let len = 4696;
    let blocks: Vec<Vec<u8>> = (0..blocks_n)
        .map(|_| {
            let mut b = vec![0u8; len];
            rng.fill(&mut b[..]);
            b
        })
        .collect();
    let (t_scalar, r_scalar) = best(3, || blocks.iter().map(|b| merkle::block_root_scalar(b)).collect::<Vec<_>>());
    let (t_lanes, r_lanes) = best(3, || merkle::block_roots(&blocks));
    let speedup = t_scalar.as_secs_f64() / t_lanes.as_secs_f64();
    let backend = dpor_keccak::Backend::best();
    let bytes = (blocks_n * len) as f64;
    let _ = writeln!(*md, "### keccak lanes: block roots (one thread)
");
    let _ = writeln!(*md, "| input | one hash at a time (`keccak-asm`) | lanes ({backend:?}, {} per permutation) | speedup | same roots |\n|---|---|---|---|---|", backend.lanes());
    let _ = writeln!(*md, "| {blocks_n} coded blocks of {len} bytes | {:.0} MB/s | {:.0} MB/s | **{speedup:.2}×** | {} |\n",
        mbps(bytes, t_scalar), mbps(bytes, t_lanes), r_scalar == r_lanes);
    println!("figure keccak_lanes_speedup {speedup:.2}");
    eprintln!("keccak lanes done");
}

/// The two keccak256 backends of alloy-primitives on the inputs the trees hash
/// (129-byte chunk leaves, 65-byte inner nodes) and on whole coded blocks: RustCrypto
/// `sha3` (alloy's default) and `keccak-asm` (its `asm-keccak` feature, which this
/// workspace enables), both called directly, plus `keccak256` as built.
fn keccak_backends(md: &mut String, quick: bool, rng: &mut ChaCha20Rng) {
    use sha3::Digest as _;
    let _ = writeln!(*md, "### keccak256 backends (one thread)\n");
    let _ = writeln!(*md, "| input | `sha3` 0.11 (alloy's default) | `keccak-asm` 0.1 (alloy's `asm-keccak`, used here) | asm / sha3 | alloy `keccak256` as built | same hashes |\n|---|---|---|---|---|---|");
    let total = if quick { 16usize << 20 } else { 64 << 20 };
    for (what, len) in [("129-byte chunk leaves", 129usize), ("65-byte inner nodes", 65), ("4696-byte coded blocks", 4696)] {
        let count = total / len;
        let mut data = vec![0u8; count * len];
        rng.fill(&mut data[..]);
        let (t_sha3, h_sha3) = best(3, || data.chunks_exact(len).map(|c| sha3::Keccak256::digest(c)[0]).fold(0u8, |a, x| a ^ x));
        let (t_asm, h_asm) = best(3, || data.chunks_exact(len).map(|c| keccak_asm::Keccak256::digest(c)[0]).fold(0u8, |a, x| a ^ x));
        let (t_alloy, h_alloy) = best(3, || data.chunks_exact(len).map(|c| keccak256(c)[0]).fold(0u8, |a, x| a ^ x));
        let same = data.chunks_exact(len).take(64).all(|c| {
            let a = keccak256(c);
            a.0[..] == keccak_asm::Keccak256::digest(c)[..] && a.0[..] == sha3::Keccak256::digest(c)[..]
        });
        let bytes = (count * len) as f64;
        let _ = writeln!(*md, "| {what} ({:.0} MiB) | {:.0} MB/s | {:.0} MB/s | **{:.2}×** | {:.0} MB/s | {} |", bytes / MIB,
            mbps(bytes, t_sha3), mbps(bytes, t_asm), t_sha3.as_secs_f64() / t_asm.as_secs_f64(), mbps(bytes, t_alloy),
            same && h_sha3 == h_asm && h_asm == h_alloy);
    }
    let _ = writeln!(*md);
    eprintln!("keccak backends done");
}
