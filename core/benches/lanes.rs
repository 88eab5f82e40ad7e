//! Per-block keccak (issue 23): the block root of a 4,696-byte coded block (a 37-leaf
//! chunk tree, 77 keccak-f permutations) with the keccak lanes, eight blocks hashed
//! together on one thread ([`merkle::block_roots_together`]), against one hash at a time with `keccak-asm`
//! ([`merkle::block_root_scalar`], alloy's `keccak256` as built). Criterion reports
//! both per block (throughput: 8 blocks per iteration); `script/bench` prints the
//! ratio as `figure keccak_lanes_speedup`.

#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use dpor_core::merkle;

fn block_roots(c: &mut Criterion) {
    let blocks: Vec<Vec<u8>> = (0..8).map(|i| (0..4696).map(|j| (i * 131 + j * 7 + j / 251) as u8).collect()).collect();
    let mut g = c.benchmark_group("block_root_4696");
    g.throughput(Throughput::Elements(8));
    g.bench_function("keccak_asm_one_at_a_time", |b| {
        b.iter(|| black_box(&blocks).iter().map(|x| merkle::block_root_scalar(x)).collect::<Vec<_>>())
    });
    g.bench_function(format!("lanes_{:?}", dpor_keccak::Backend::best()), |b| {
        b.iter(|| merkle::block_roots_together(black_box(&blocks)))
    });
    g.finish();
}

criterion_group!(benches, block_roots);
criterion_main!(benches);
