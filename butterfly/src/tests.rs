//! Every backend the CPU runs against `u128` arithmetic mod p, at the edges of every
//! carry, borrow and reduction and at random values, on lengths that leave every
//! possible tail.

use super::*;
use proptest::prelude::*;

const P: u128 = MODULUS as u128;

fn backends() -> Vec<Backend> {
    [Backend::Scalar, Backend::Avx512].into_iter().filter(|b| b.supported()).collect()
}

fn edges() -> Vec<u64> {
    let mut v = vec![0, 1, 2, EPSILON - 1, EPSILON, EPSILON + 1, 1 << 32, (1 << 32) + 1, 1 << 63, MODULUS - 2, MODULUS - 1];
    for k in 0..64 {
        v.push((1u64 << k) % MODULUS);
        v.push(MODULUS - 1 - ((1u64 << k) % MODULUS));
    }
    v
}

fn reference(x: &[u64], y: &[u64], c: u64) -> (Vec<u64>, Vec<u64>) {
    let t: Vec<u128> = y.iter().map(|&b| b as u128 * c as u128 % P).collect();
    let xo = x.iter().zip(&t).map(|(&a, &t)| ((a as u128 + t) % P) as u64).collect();
    let yo = x.iter().zip(&t).map(|(&a, &t)| ((a as u128 + P - t) % P) as u64).collect();
    (xo, yo)
}

fn check(x: &[u64], y: &[u64], c: u64) {
    let (xr, yr) = reference(x, y, c);
    for b in backends() {
        let (mut xa, mut ya) = (x.to_vec(), y.to_vec());
        butterflies_with(b, &mut xa, &mut ya, c);
        assert_eq!((&xa, &ya), (&xr, &yr), "butterflies on {b:?}, c = {c}");
        if c == 1 {
            let (mut xa, mut ya) = (x.to_vec(), y.to_vec());
            add_sub_with(b, &mut xa, &mut ya);
            assert_eq!((&xa, &ya), (&xr, &yr), "add_sub on {b:?}");
        }
        let mut s = y.to_vec();
        scale_with(b, &mut s, c);
        let sr: Vec<u64> = y.iter().map(|&v| (v as u128 * c as u128 % P) as u64).collect();
        assert_eq!(s, sr, "scale on {b:?}, c = {c}");
    }
}

#[test]
fn edge_values_on_every_backend() {
    let e = edges();
    // Every pair of edge values meets in some lane, with every edge value as twiddle.
    let x: Vec<u64> = e.iter().flat_map(|&a| std::iter::repeat_n(a, e.len())).collect();
    let y: Vec<u64> = (0..e.len()).flat_map(|_| e.iter().copied()).collect();
    for &c in &e {
        check(&x, &y, c);
    }
}

#[test]
fn every_tail_length() {
    for len in 0..40usize {
        let x: Vec<u64> = (0..len as u64).map(|i| MODULUS - 1 - i * 0x1234_5678_9abc).collect();
        let y: Vec<u64> = (0..len as u64).map(|i| (i * 0xdead_beef_1234) % MODULUS).collect();
        check(&x, &y, MODULUS - 3);
        check(&x, &y, 1);
    }
}

#[test]
fn the_best_backend_is_avx512_where_the_cpu_has_it() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") && std::env::var("DPOR_BUTTERFLY").is_err() {
        assert_eq!(Backend::best(), Backend::Avx512);
    }
    assert!(Backend::best().supported());
}

proptest! {
    #[test]
    fn random_blocks_match_u128_arithmetic(
        pairs in proptest::collection::vec((0..MODULUS, 0..MODULUS), 0..70),
        c in 0..MODULUS,
    ) {
        let (x, y): (Vec<u64>, Vec<u64>) = pairs.into_iter().unzip();
        check(&x, &y, c);
        check(&x, &y, 1);
    }
}
