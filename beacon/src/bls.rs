//! BLS signatures on BN254 with signatures in G1 and public keys in G2, as drand's
//! `bls-bn254-unchained-on-g1` scheme uses them, and their byte encodings.
//!
//! Encodings (the contract's, which are also drand's kyber encodings, which are also the word order of the
//! EIP-197 pairing precompile input):
//! - a signature (G1 point) is 64 bytes: `x ‖ y`, each a 32-byte big-endian integer `< p`;
//! - a public key (G2 point, coordinates in `Fp2 = Fp[i]/(i^2 + 1)`) is 128 bytes or four 256-bit words:
//!   `x.c1 ‖ x.c0 ‖ y.c1 ‖ y.c0` (imaginary part first), each `< p`. drand's `public_key` hex split into four
//!   32-byte words is exactly the `uint256[4]` that `DrandBeacon`'s constructor takes.
//!
//! Verification: `e(σ, −g2) · e(H(m), pk) = 1` with `m = keccak256(round as 8 big-endian bytes)` and `H` the
//! hash-to-curve of [`crate::h2c`] under [`crate::DST`].

use alloy_primitives::{keccak256, U256};
use ark_bn254::{Bn254, Fq, Fq2, Fr, G1Affine, G2Affine};
use ark_ec::{pairing::Pairing, AffineRepr, CurveGroup};
use ark_ff::{BigInt, BigInteger, PrimeField, Zero};

use crate::{h2c, BeaconError, DST};

/// The 32-byte message a round's signature signs: `keccak256(round as u64 big-endian)` (drand
/// `crypto/schemes.go`, `DigestFunc` of `NewPedersenBLSBN254UnchainedOnG1Scheme`).
pub fn round_message(round: u64) -> [u8; 32] {
    keccak256(round.to_be_bytes()).0
}

/// The G1 point a round's signature is a multiple of: `hash_to_g1(round_message(round), DST)`.
pub fn round_point(round: u64) -> Result<G1Affine, BeaconError> {
    h2c::hash_to_g1(&round_message(round), DST)
}

/// A base-field element from a 32-byte big-endian word; `None` if the word is `>= p` (not canonical).
fn fq_from_be(word: &[u8; 32]) -> Option<Fq> {
    let mut limbs = [0u64; 4];
    for (i, limb) in limbs.iter_mut().enumerate() {
        let start = 32 - 8 * (i + 1);
        let mut b = [0u8; 8];
        b.copy_from_slice(&word[start..start + 8]);
        *limb = u64::from_be_bytes(b);
    }
    Fq::from_bigint(BigInt::new(limbs))
}

/// The canonical 32-byte big-endian encoding of a base-field element.
fn fq_to_be(x: &Fq) -> [u8; 32] {
    let v = x.into_bigint().to_bytes_be();
    let mut out = [0u8; 32];
    out[32 - v.len()..].copy_from_slice(&v);
    out
}

fn word(bytes: &[u8], i: usize) -> [u8; 32] {
    let mut w = [0u8; 32];
    w.copy_from_slice(&bytes[32 * i..32 * (i + 1)]);
    w
}

/// A BLS signature: a point of BN254 G1, never the identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature(G1Affine);

impl Signature {
    /// Encoded length in bytes.
    pub const LEN: usize = 64;

    /// Parses the contract encoding `x ‖ y` (64 bytes). Rejects a wrong length, coordinates `>= p`, the
    /// identity `(0, 0)` and points not on the curve (G1 has cofactor 1, so on the curve means in the group).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, BeaconError> {
        if bytes.len() != Self::LEN {
            return Err(BeaconError::Length {
                what: "signature",
                expected: Self::LEN,
                got: bytes.len(),
            });
        }
        let x = fq_from_be(&word(bytes, 0)).ok_or(BeaconError::NonCanonical("signature"))?;
        let y = fq_from_be(&word(bytes, 1)).ok_or(BeaconError::NonCanonical("signature"))?;
        if x.is_zero() && y.is_zero() {
            return Err(BeaconError::Identity("signature"));
        }
        let p = G1Affine::new_unchecked(x, y);
        if !p.is_on_curve() {
            return Err(BeaconError::NotOnCurve("signature"));
        }
        if !p.is_in_correct_subgroup_assuming_on_curve() {
            return Err(BeaconError::NotInSubgroup("signature"));
        }
        Ok(Self(p))
    }

    /// The contract encoding `x ‖ y`.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut out = [0u8; 64];
        // A Signature is never the identity, so xy() is always Some.
        if let Some((x, y)) = self.0.xy() {
            out[..32].copy_from_slice(&fq_to_be(&x));
            out[32..].copy_from_slice(&fq_to_be(&y));
        }
        out
    }

    /// The underlying group element.
    pub fn point(&self) -> G1Affine {
        self.0
    }
}

/// A BLS public key: a point of BN254 G2 in the prime-order subgroup, never the identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublicKey(G2Affine);

impl PublicKey {
    /// Encoded length in bytes.
    pub const LEN: usize = 128;

    /// Parses the 128-byte encoding `x.c1 ‖ x.c0 ‖ y.c1 ‖ y.c0` (drand's `public_key`). Rejects a wrong length,
    /// words `>= p`, the identity (all zero), points off the twist and points outside the order-r subgroup.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, BeaconError> {
        if bytes.len() != Self::LEN {
            return Err(BeaconError::Length {
                what: "public key",
                expected: Self::LEN,
                got: bytes.len(),
            });
        }
        let mut w = [Fq::zero(); 4];
        for (i, slot) in w.iter_mut().enumerate() {
            *slot = fq_from_be(&word(bytes, i)).ok_or(BeaconError::NonCanonical("public key"))?;
        }
        if w.iter().all(|c| c.is_zero()) {
            return Err(BeaconError::Identity("public key"));
        }
        let p = G2Affine::new_unchecked(Fq2::new(w[1], w[0]), Fq2::new(w[3], w[2]));
        if !p.is_on_curve() {
            return Err(BeaconError::NotOnCurve("public key"));
        }
        if !p.is_in_correct_subgroup_assuming_on_curve() {
            return Err(BeaconError::NotInSubgroup("public key"));
        }
        Ok(Self(p))
    }

    /// Parses the four words the contract's constructor takes (same order as [`PublicKey::from_bytes`]).
    pub fn from_words(words: &[U256; 4]) -> Result<Self, BeaconError> {
        let mut bytes = [0u8; 128];
        for (i, w) in words.iter().enumerate() {
            bytes[32 * i..32 * (i + 1)].copy_from_slice(&w.to_be_bytes::<32>());
        }
        Self::from_bytes(&bytes)
    }

    /// The 128-byte encoding `x.c1 ‖ x.c0 ‖ y.c1 ‖ y.c0`.
    pub fn to_bytes(&self) -> [u8; 128] {
        let mut out = [0u8; 128];
        if let Some((x, y)) = self.0.xy() {
            for (i, c) in [x.c1, x.c0, y.c1, y.c0].iter().enumerate() {
                out[32 * i..32 * (i + 1)].copy_from_slice(&fq_to_be(c));
            }
        }
        out
    }

    /// The four words `[x.c1, x.c0, y.c1, y.c0]`: `DrandBeacon`'s constructor argument.
    pub fn to_words(&self) -> [U256; 4] {
        let b = self.to_bytes();
        [0, 1, 2, 3].map(|i| U256::from_be_bytes(word(&b, i)))
    }

    /// The underlying group element.
    pub fn point(&self) -> G2Affine {
        self.0
    }
}

/// A BLS secret key: a non-zero scalar of BN254's group order r.
#[derive(Clone)]
pub struct SecretKey(Fr);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

/// Domain separation tag of [`SecretKey::from_seed`]'s key derivation.
pub const KEYGEN_DST: &[u8] = b"DPOR-BEACON-V1_KEYGEN_BN254_XMD:KECCAK-256";

impl SecretKey {
    /// Derives a key from seed material: `sk = OS2IP(expand_message_xmd(seed, KEYGEN_DST, 48)) mod r` (the
    /// hash_to_field recipe of RFC 9380 §5, statistical distance from uniform below 2^-128). Deterministic; the
    /// seed must hold at least 128 bits of entropy for the key to be secret.
    ///
    /// Errors: [`BeaconError::ZeroSecretKey`] in the (probability 2^-254) case that the scalar is 0.
    pub fn from_seed(seed: &[u8]) -> Result<Self, BeaconError> {
        let bytes = h2c::expand_message_xmd_keccak256(seed, KEYGEN_DST, h2c::L)?;
        Self::from_scalar(Fr::from_be_bytes_mod_order(&bytes))
    }

    /// Parses a 32-byte big-endian scalar; rejects values `>= r` and 0.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, BeaconError> {
        if bytes.len() != 32 {
            return Err(BeaconError::Length {
                what: "secret key",
                expected: 32,
                got: bytes.len(),
            });
        }
        let s = Fr::from_be_bytes_mod_order(bytes);
        let mut canon = [0u8; 32];
        let v = s.into_bigint().to_bytes_be();
        canon[32 - v.len()..].copy_from_slice(&v);
        if canon != bytes {
            return Err(BeaconError::NonCanonical("secret key"));
        }
        Self::from_scalar(s)
    }

    fn from_scalar(s: Fr) -> Result<Self, BeaconError> {
        if s.is_zero() {
            return Err(BeaconError::ZeroSecretKey);
        }
        Ok(Self(s))
    }

    /// The 32-byte big-endian scalar.
    pub fn to_bytes(&self) -> [u8; 32] {
        let v = self.0.into_bigint().to_bytes_be();
        let mut out = [0u8; 32];
        out[32 - v.len()..].copy_from_slice(&v);
        out
    }

    /// `pk = sk · g2`.
    pub fn public_key(&self) -> PublicKey {
        PublicKey((G2Affine::generator() * self.0).into_affine())
    }

    /// The signature of `round`: `sk · H(keccak256(round_be))`. Round 0 can be signed but the contract never
    /// accepts it (drand's round 0 is the genesis, which has no signature).
    pub fn sign_round(&self, round: u64) -> Result<Signature, BeaconError> {
        let h = round_point(round)?;
        Ok(Signature((h * self.0).into_affine()))
    }
}

/// Verifies a round signature: `e(σ, −g2) · e(H(m), pk) = 1`.
///
/// Errors: [`BeaconError::RoundZero`] for round 0; the parse errors of [`Signature::from_bytes`];
/// [`BeaconError::BadSignature`] if the pairing check fails.
pub fn verify(pk: &PublicKey, round: u64, sig: &[u8]) -> Result<(), BeaconError> {
    if round == 0 {
        return Err(BeaconError::RoundZero);
    }
    let s = Signature::from_bytes(sig)?;
    let h = round_point(round)?;
    let out = Bn254::multi_pairing([s.0, h], [-G2Affine::generator(), pk.0]);
    if out.is_zero() {
        Ok(())
    } else {
        Err(BeaconError::BadSignature { round })
    }
}
