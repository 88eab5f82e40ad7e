//! Goldilocks butterflies on whole blocks, in SIMD lanes.
//!
//! The code of §4.4–4.5 (`dpor_core::code`) mixes blocks pairwise: every element of
//! a block pair (x, y) takes the same twiddle c, x ← x + c·y, y ← x − c·y (mod p,
//! p = 2^64 − 2^32 + 1). These loops were a fifth of a batched write's CPU and most of
//! a C-rebuild's (issue 23). Here they run on plain `u64` values, eight at a time in
//! AVX-512 registers when the CPU has AVX-512F ([`Backend::best`]), else one at a
//! time; both give the same values.
//!
//! Products are plain modular products (no Montgomery reduction). A caller holding
//! elements in Montgomery form (a·R mod p, as ark-ff does) passes them as they are and
//! the twiddle in canonical form: (a·R)·c ≡ (a·c)·R, so the results are the
//! Montgomery forms of the true results.
//!
//! Every function requires its inputs below p and leaves its outputs below p.
//! Reduction: p = 2^64 − ε with ε = 2^32 − 1, so 2^64 ≡ ε and 2^96 ≡ −1 (mod p); a
//! 128-bit product hi·2^64 + lo with hi = h1·2^32 + h0 is lo − h1 + h0·ε.
//! Tested against `u128` arithmetic on every backend the CPU runs.

#[cfg(target_arch = "x86_64")]
mod avx512;
mod scalar;

use std::sync::OnceLock;

/// The modulus p = 2^64 − 2^32 + 1.
pub const MODULUS: u64 = 0xFFFF_FFFF_0000_0001;

/// ε = 2^64 mod p = 2^32 − 1.
pub(crate) const EPSILON: u64 = 0xFFFF_FFFF;

/// An implementation of the kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// One element at a time with 64×64→128-bit products.
    Scalar,
    /// Eight elements at a time in 512-bit registers (x86-64 CPUs with AVX-512F).
    Avx512,
}

impl Backend {
    /// The fastest backend this CPU runs, chosen once: [`Backend::Avx512`] if the CPU
    /// has AVX-512F, else [`Backend::Scalar`]. `DPOR_BUTTERFLY=scalar` forces the
    /// scalar path (for comparisons).
    pub fn best() -> Backend {
        static BEST: OnceLock<Backend> = OnceLock::new();
        *BEST.get_or_init(|| {
            let forced = std::env::var("DPOR_BUTTERFLY").unwrap_or_default();
            if forced.trim() == "scalar" {
                return Backend::Scalar;
            }
            if Backend::Avx512.supported() {
                Backend::Avx512
            } else {
                Backend::Scalar
            }
        })
    }

    /// Whether this CPU runs the backend.
    pub fn supported(self) -> bool {
        match self {
            Backend::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            Backend::Avx512 => false,
        }
    }
}

/// The butterfly of a block pair with twiddle `c`: for every i, with t = c·y[i],
/// x[i] ← x[i] + t and y[i] ← x[i] − t (mod p), on the [best](Backend::best) backend.
///
/// Panics if `x` and `y` differ in length (a caller's bug). Values must be below p.
pub fn butterflies(x: &mut [u64], y: &mut [u64], c: u64) {
    butterflies_with(Backend::best(), x, y, c)
}

/// [`butterflies`] on `backend` (the scalar path if the CPU does not run it).
pub fn butterflies_with(backend: Backend, x: &mut [u64], y: &mut [u64], c: u64) {
    assert_eq!(x.len(), y.len(), "a butterfly's two blocks have one length");
    #[cfg(target_arch = "x86_64")]
    if backend == Backend::Avx512 && backend.supported() {
        // SAFETY: the CPU has AVX-512F (checked just above); the slices are valid for
        // their lengths and of equal length (asserted).
        unsafe { avx512::butterflies(x, y, c) };
        return;
    }
    let _ = backend;
    scalar::butterflies(x, y, c)
}

/// The butterfly with twiddle 1: x[i] ← x[i] + y[i], y[i] ← x[i] − y[i] (mod p), on
/// the [best](Backend::best) backend.
///
/// Panics if `x` and `y` differ in length. Values must be below p.
pub fn add_sub(x: &mut [u64], y: &mut [u64]) {
    add_sub_with(Backend::best(), x, y)
}

/// [`add_sub`] on `backend` (the scalar path if the CPU does not run it).
pub fn add_sub_with(backend: Backend, x: &mut [u64], y: &mut [u64]) {
    assert_eq!(x.len(), y.len(), "a butterfly's two blocks have one length");
    #[cfg(target_arch = "x86_64")]
    if backend == Backend::Avx512 && backend.supported() {
        // SAFETY: AVX-512F checked just above; equal lengths asserted.
        unsafe { avx512::add_sub(x, y) };
        return;
    }
    let _ = backend;
    scalar::add_sub(x, y)
}

/// x[i] ← c·x[i] (mod p) for every i, on the [best](Backend::best) backend. Values
/// must be below p.
pub fn scale(x: &mut [u64], c: u64) {
    scale_with(Backend::best(), x, c)
}

/// [`scale`] on `backend` (the scalar path if the CPU does not run it).
pub fn scale_with(backend: Backend, x: &mut [u64], c: u64) {
    #[cfg(target_arch = "x86_64")]
    if backend == Backend::Avx512 && backend.supported() {
        // SAFETY: AVX-512F checked just above; the slice is valid for its length.
        unsafe { avx512::scale(x, c) };
        return;
    }
    let _ = backend;
    scalar::scale(x, c)
}

/// a·b mod p for a, b below p (one product, the scalar path's).
pub fn mul(a: u64, b: u64) -> u64 {
    scalar::mul(a, b)
}

#[cfg(test)]
mod tests;
