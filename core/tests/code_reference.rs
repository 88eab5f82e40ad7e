//! The code against independent references: the brute-force generator-matrix product
//! and ark-poly's FFT (the Reed–Solomon fact of DESIGN §4), for every level of small N.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use common::*;
use dpor_core::block::BlockFormat;
use dpor_core::code::{self, bit_reverse, level_start, mix, y_scale, CodeError};
use dpor_core::field::{root_of_unity, Fp};
use dpor_core::state::{ServerState, WriteStep};
use rand::Rng;

/// Every filled level and C after every write equals G·D (D = the records of its
/// window in write order), for N = 2..64 and writes through two C-rebuilds.
#[test]
fn levels_and_c_equal_generator_matrix_product() {
    let format = BlockFormat::new(14).unwrap(); // width 3
    let w = format.width();
    let mut rng = rng(1);
    for log_n in 1..=6u32 {
        let n = 1usize << log_n;
        let blocks: Vec<Vec<u8>> = (0..n).map(|_| random_block(&mut rng, 14)).collect();
        let mut state = ServerState::new(format, blocks).unwrap();
        let mut log: Vec<Vec<Fp>> = Vec::new(); // records written since the last rebuild
        for _ in 0..(2 * n + 3) {
            let i = rng.gen_range(0..n as u64);
            let b = random_block(&mut rng, 14);
            let rec = format.record(i, &b).unwrap();
            match state.write(i, b).unwrap() {
                WriteStep::CRebuild => log.clear(),
                WriteStep::Level(_) => log.push(rec),
            }
            let t = state.write_count();
            assert_eq!(t as usize, log.len());
            for level in 0..log_n {
                let run = state.level(level).unwrap();
                assert_eq!(run.is_some(), (t >> level) & 1 == 1, "level {level} filled iff bit set, t={t}");
                if let Some(run) = run {
                    let m = 1usize << level;
                    let t0 = level_start(t, level) as usize;
                    let data: Vec<Fp> = log[t0..t0 + m].concat();
                    let g = generator_matrix(m, y_scale(t0 as u64, log_n).unwrap());
                    assert_eq!(run.blocks, matrix_encode(&g, &data, w), "N={n} t={t} level={level}");
                }
            }
            let u: Vec<Fp> = state.u().iter().enumerate().flat_map(|(i, b)| format.record(i as u64, b).unwrap()).collect();
            if t == 0 {
                let g = generator_matrix(n, Fp::from(1u64));
                assert_eq!(state.c().blocks, matrix_encode(&g, &u, w), "C after rebuild, N={n}");
            }
        }
        assert_eq!(state.rebuild_count(), (2 * n as u64 + 3) / n as u64);
    }
}

/// The RS fact, against ark-poly's FFT: a level's X half and its Y half divided by
/// c are the evaluations, on the whole subgroup of order 2m (X at even, Y at odd
/// powers), of the polynomial whose coefficients are its blocks in bit-reversed
/// write order.
#[test]
fn levels_are_reed_solomon_codewords_per_ark_poly_fft() {
    let mut rng = rng(2);
    for log_n in 1..=8u32 {
        for level in 0..log_n {
            let m = 1usize << level;
            // Widths of 8 and more also run `dpor_butterfly`'s SIMD lanes (tails included).
            let width = [2, 19][level as usize % 2];
            // A window starting at an aligned t0 with a random higher part.
            let t0 = (rng.gen_range(0..(1u64 << log_n)) >> (level + 1)) << (level + 1);
            let data = random_elements(&mut rng, m * width);
            let run = hadd_window(&data, t0, level, log_n, width);
            let c = y_scale(t0, log_n).unwrap();
            let domain = Radix2EvaluationDomain::<Fp>::new(2 * m).unwrap();
            for col in 0..width {
                let mut coeffs = vec![Fp::from(0u64); 2 * m];
                for r in 0..m {
                    coeffs[bit_reverse(r as u64, level) as usize] = data[r * width + col];
                }
                let evals = domain.fft(&coeffs);
                for i in 0..m {
                    assert_eq!(run[i * width + col], evals[2 * i], "X[{i}]");
                    assert_eq!(run[(m + i) * width + col], c * evals[2 * i + 1], "Y[{i}]");
                }
            }
        }
    }
}

/// C-rebuild equals the FFT of U with coefficient ψ_k(r) = U[r], evaluated on the
/// 2N-th roots of unity (X even, Y odd), via ark-poly.
#[test]
fn c_rebuild_equals_ark_poly_fft() {
    let mut rng = rng(3);
    for log_n in 0..=10u32 {
        let n = 1usize << log_n;
        let width = [3, 17][log_n as usize % 2];
        let u = random_elements(&mut rng, n * width);
        let c = code::c_rebuild(&u, log_n, width).unwrap();
        let domain = Radix2EvaluationDomain::<Fp>::new(2 * n).unwrap();
        for col in 0..width {
            let mut coeffs = vec![Fp::from(0u64); 2 * n];
            for r in 0..n {
                coeffs[bit_reverse(r as u64, log_n) as usize] = u[r * width + col];
            }
            let evals = domain.fft(&coeffs);
            for i in 0..n {
                assert_eq!(c[i * width + col], evals[2 * i]);
                assert_eq!(c[(n + i) * width + col], evals[2 * i + 1]);
            }
        }
    }
}

/// mix is the butterfly of Fig. 4, checked entry by entry.
#[test]
fn mix_matches_definition() {
    let mut rng = rng(4);
    for log_m in 0..6u32 {
        let m = 1usize << log_m;
        let width = [2, 9][log_m as usize % 2];
        let buf = random_elements(&mut rng, 2 * m * width);
        let mut mixed = buf.clone();
        mix(&mut mixed, width).unwrap();
        let nu = root_of_unity(log_m + 1).unwrap();
        let mut nui = Fp::from(1u64);
        for i in 0..m {
            for c in 0..width {
                let a0 = buf[i * width + c];
                let a1 = buf[(m + i) * width + c];
                assert_eq!(mixed[i * width + c], a0 + nui * a1);
                assert_eq!(mixed[(m + i) * width + c], a0 - nui * a1);
            }
            nui *= nu;
        }
    }
    let mut odd = vec![Fp::from(0u64); 6];
    assert_eq!(mix(&mut odd, 2), Err(CodeError::NotPowerOfTwo(3)));
    assert_eq!(mix(&mut odd, 0), Err(CodeError::ZeroWidth));
}

/// HAdd rejects consumed levels that do not match the counter.
#[test]
fn h_add_checks_shapes() {
    let rec = vec![Fp::from(1u64); 2];
    assert!(matches!(code::h_add(1, 3, &rec, &[], 2), Err(CodeError::Levels { needed: 1, got: 0, .. })));
    let bad = vec![Fp::from(1u64); 3];
    assert!(matches!(code::h_add(1, 3, &rec, &[&bad], 2), Err(CodeError::Shape { .. })));
    assert!(matches!(code::h_add(0, 3, &[Fp::from(1u64)], &[], 2), Err(CodeError::Shape { .. })));
}
