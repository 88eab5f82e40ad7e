//! Butterflies of one block pair (586 elements: a coded block of β = 4096 bytes) on
//! each backend the CPU runs: the kernel of the code's mixes and C-rebuild.

#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dpor_butterfly::{butterflies_with, scale_with, Backend, MODULUS};

fn bench(c: &mut Criterion) {
    let width = 586usize;
    let mut x: Vec<u64> = (0..width as u64).map(|i| (i * 0x9e37_79b9_7f4a_7c15) % MODULUS).collect();
    let mut y: Vec<u64> = (0..width as u64).map(|i| (i * 0xc2b2_ae3d_27d4_eb4f) % MODULUS).collect();
    let tw = 0x1234_5678_9abc_def0 % MODULUS;
    let mut g = c.benchmark_group("butterflies");
    g.throughput(Throughput::Elements(width as u64));
    for b in [Backend::Scalar, Backend::Avx512].into_iter().filter(|b| b.supported()) {
        g.bench_function(format!("{b:?}"), |bn| bn.iter(|| butterflies_with(b, &mut x, &mut y, tw)));
        g.bench_function(format!("scale {b:?}"), |bn| bn.iter(|| scale_with(b, &mut x, tw)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
