//! Closed forms the simulator is checked against, and used where losses are too rare
//! to observe (eleven nines is one file in 10^11 a year).

/// ln C(n, m).
fn ln_choose(n: u32, m: u32) -> f64 {
    (1..=m).map(|i| (f64::from(n - m + i) / f64::from(i)).ln()).sum()
}

/// P(X = m) for X ~ Binomial(n, p).
pub fn binomial_pmf(n: u32, m: u32, p: f64) -> f64 {
    if m > n {
        return 0.0;
    }
    if p <= 0.0 {
        return if m == 0 { 1.0 } else { 0.0 };
    }
    if p >= 1.0 {
        return if m == n { 1.0 } else { 0.0 };
    }
    (ln_choose(n, m) + f64::from(m) * p.ln() + f64::from(n - m) * (1.0 - p).ln()).exp()
}

/// P(X ≥ m) for X ~ Binomial(n, p).
pub fn binomial_tail(n: u32, m: u32, p: f64) -> f64 {
    (m..=n).map(|j| binomial_pmf(n, j, p)).sum()
}

/// Loss rate (per file, per unit of time of `rate`) of a k-of-n file whose shards fail
/// independently at `rate` and are each repaired `delay` later (same time unit).
///
/// Each shard alternates up (exponential, mean 1/rate) and down (`delay`); in the
/// stationary regime each is down with probability p = rate·delay / (1 + rate·delay),
/// independently, so exactly n − k are down with probability
/// C(n, n−k)·p^(n−k)·(1 − p)^k, and then any of the k up shards failing (rate k·rate)
/// loses the file: rate_loss = k·rate·C(n, n−k)·p^(n−k)·(1 − p)^k. That is the
/// probability that more than n − k of the n shards fail within one repair delay of
/// each other, as a rate.
pub fn independent_loss_rate(k: u16, n: u16, rate: f64, delay: f64) -> f64 {
    let x = rate * delay;
    let p = x / (1.0 + x);
    f64::from(k) * rate * binomial_pmf(u32::from(n), u32::from(n - k), p)
}

/// Loss rate (per file, per unit of time of `rate`) of a k-of-n file whose shards fail
/// independently at `rate` and are all repaired at the end of the epoch (length
/// `epoch`, same unit) in which they failed — the case of disk losses, which show as a
/// missed epoch proof at the epoch's end. At phase φ of an epoch a shard is down with
/// probability p(φ) = 1 − e^(−rate·φ); averaging k·rate·P(Binomial(n, p(φ)) = n − k)
/// over φ (midpoint rule, 4096 steps). Shards failing in one epoch are down together:
/// for n − k ≥ 2 this is above [`independent_loss_rate`] with the mean delay epoch/2
/// (by E[φ^m]/E[φ]^m = 2^m/(m + 1) when rate·epoch is small).
pub fn epoch_aligned_loss_rate(k: u16, n: u16, rate: f64, epoch: f64) -> f64 {
    const STEPS: u32 = 4096;
    let sum: f64 = (0..STEPS)
        .map(|i| {
            let phi = (f64::from(i) + 0.5) / f64::from(STEPS) * epoch;
            binomial_pmf(u32::from(n), u32::from(n - k), 1.0 - (-rate * phi).exp())
        })
        .sum();
    f64::from(k) * rate * sum / f64::from(STEPS)
}

/// Loss rate per file-year from whole failure domains losing their data at once:
/// Σ_r `loss_rate` · P(Binomial(n, w_r) > n − k), w_r the domain's share of the
/// shards (placement ignores domains, so a file's shards fall in domain r with
/// probability w_r each). A lower bound: other shards already down are ignored.
pub fn domain_loss_rate(k: u16, n: u16, shares: &[f64], loss_rate: f64) -> f64 {
    shares.iter().map(|w| loss_rate * binomial_tail(u32::from(n), u32::from(n - k) + 1, *w)).sum()
}

/// The failure domains' shares: weight ∝ 1/√rank over `regions` (as the simulator draws).
pub fn domain_shares(regions: u16) -> Vec<f64> {
    let w: Vec<f64> = (1..=u32::from(regions.max(1))).map(|r| 1.0 / f64::from(r).sqrt()).collect();
    let s: f64 = w.iter().sum();
    w.into_iter().map(|x| x / s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_against_small_cases() {
        assert!((binomial_pmf(4, 2, 0.5) - 6.0 / 16.0).abs() < 1e-12);
        assert!((binomial_tail(3, 2, 0.5) - 0.5).abs() < 1e-12);
        assert!((binomial_tail(10, 0, 0.3) - 1.0).abs() < 1e-12);
        assert_eq!(binomial_pmf(3, 4, 0.5), 0.0);
        let s: f64 = domain_shares(7).iter().sum();
        assert!((s - 1.0).abs() < 1e-12);
    }

    #[test]
    fn epoch_alignment_raises_the_rate_by_the_moment_ratio() {
        // m = n − k = 2: E[φ²]/E[φ]² = 4/3 against the mean delay.
        let (l, e) = (1e-3, 1.0);
        let r = epoch_aligned_loss_rate(2, 4, l, e) / independent_loss_rate(2, 4, l, e / 2.0);
        assert!((r - 4.0 / 3.0).abs() < 0.01, "{r}");
        let r1 = epoch_aligned_loss_rate(1, 2, l, e) / independent_loss_rate(1, 2, l, e / 2.0);
        assert!((r1 - 1.0).abs() < 0.01, "{r1}");
    }

    #[test]
    fn one_of_two_mirrors_matches_the_direct_form() {
        // 1-of-2: lost when the second copy fails while the first is down:
        // rate = 1·λ·2·p·(1−p), p = λD/(1+λD).
        let (l, d) = (0.5, 0.1);
        let p = l * d / (1.0 + l * d);
        assert!((independent_loss_rate(1, 2, l, d) - l * 2.0 * p * (1.0 - p)).abs() < 1e-15);
    }
}
