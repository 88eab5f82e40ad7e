//! Throughput of the stripe coder at β = 4096: encode (split), decode with n − k data
//! blocks lost, and a one-block parity delta, for 4-of-6 and 10-of-30.

#![allow(missing_docs, clippy::unwrap_used)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dpor_disperse::{Geometry, ShardIndex, StripeCoder};
use rand::{RngCore, SeedableRng};

fn bench(c: &mut Criterion) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    for (k, n) in [(4u16, 6u16), (10, 30)] {
        let g = Geometry::new(k, n, 4096).unwrap();
        let mut coder = StripeCoder::new(g).unwrap();
        let mut file = vec![0u8; 4 << 20];
        rng.fill_bytes(&mut file);
        let mut group = c.benchmark_group(format!("rs_{k}_of_{n}"));
        group.sample_size(10);
        group.throughput(Throughput::Bytes(file.len() as u64));
        group.bench_function("split_4MiB", |b| b.iter(|| coder.split_file(&file).unwrap()));
        let shards = coder.split_file(&file).unwrap();
        // Lose the first n − k data shards (or all data shards if n − k ≥ k).
        let given: Vec<Option<&[u8]>> =
            shards.iter().enumerate().map(|(i, s)| (i >= (n - k) as usize).then_some(s.as_slice())).collect();
        group.bench_function("join_4MiB_lost_n_minus_k", |b| {
            b.iter(|| coder.join_file(file.len() as u64, &given).unwrap())
        });
        group.throughput(Throughput::Bytes(4096));
        let old = vec![1u8; 4096];
        let new = vec![2u8; 4096];
        group.bench_function("parity_delta_one_block", |b| {
            b.iter(|| coder.parity_delta(ShardIndex(0), &old, &new).unwrap())
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
