//! keccak256 per input: four inputs in AVX2 lanes against `keccak-asm` one at a time,
//! on the two input sizes the trees hash (a 129-byte chunk leaf, a 65-byte node).
//! `dpor-core`'s bench compares whole block roots the same way.

#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use dpor_keccak::{keccak256_many_with, keccak256_x4_with, Backend};

fn lanes(c: &mut Criterion) {
    let mut g = c.benchmark_group("keccak256_x4");
    g.throughput(Throughput::Elements(4));
    for len in [129usize, 65] {
        let inputs: Vec<Vec<u8>> = (0..4).map(|l| vec![l as u8; len]).collect();
        let ins = [&inputs[0][..], &inputs[1][..], &inputs[2][..], &inputs[3][..]];
        g.bench_function(format!("scalar_keccak_asm/{len}"), |b| b.iter(|| keccak256_x4_with(Backend::Scalar, black_box(ins))));
        for (name, backend) in [("avx2_lanes", Backend::avx2()), ("avx512_lanes", Backend::avx512())] {
            if let Some(backend) = backend {
                g.bench_function(format!("{name}/{len}"), |b| b.iter(|| keccak256_x4_with(backend, black_box(ins))));
            }
        }
    }
    g.finish();
    let mut g = c.benchmark_group("keccak256_many_64");
    g.throughput(Throughput::Elements(64));
    let inputs: Vec<Vec<u8>> = (0..64).map(|l| vec![l as u8; 129]).collect();
    let refs: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
    let mut out = vec![[0u8; 32]; 64];
    for backend in [Some(Backend::Scalar), Backend::avx2(), Backend::avx512()].into_iter().flatten() {
        g.bench_function(format!("{backend:?}/129"), |b| b.iter(|| keccak256_many_with(backend, black_box(&refs), &mut out)));
    }
    g.finish();
}

criterion_group!(benches, lanes);
criterion_main!(benches);
