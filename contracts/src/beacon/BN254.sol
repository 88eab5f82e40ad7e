// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title BN254 (alt_bn128) hash-to-curve and BLS checks with the EVM precompiles
/// @notice What drand's `bls-bn254-unchained-on-g1` scheme needs on chain:
///         - RFC 9380 `expand_message_xmd` with keccak256 (§5.3.1) and `hash_to_field` (§5.2, L = 48, count 2);
///         - the Shallue–van de Woestijne map to G1 (§6.6.1, Z = 1) and `hash_to_curve = map(u0) + map(u1)` (§3);
///         - point checks (canonical coordinates, curve equations) and the BLS pairing check
///           `e(sig, -g2) * e(H(m), pk) == 1` through the pairing precompile (EIP-197).
///         Encodings: a G1 point is (x, y); a G2 point is four words (x.c1, x.c0, y.c1, y.c0), imaginary part
///         first, which is the EIP-197 input order and drand's (kyber's) byte order.
///         Precompiles: 0x05 modexp (square roots and inverses), 0x06 ecAdd, 0x08 pairing (EIP-196/197/198).
/// @dev Ported from kevincharm/bls-bn254 `contracts/BLS.sol` (MIT, itself adapted from hubble-contracts; the SVDW
///      constants and the pairing layout are theirs), with these changes: square roots, inverses and the
///      quadratic-residue test use the modexp precompile (one `a^((p+1)/4)` per candidate, checked by squaring,
///      instead of a Legendre symbol and an addition chain); G2 words in EIP-197 order; custom errors; a message
///      of any length. The off-chain twin is the Rust crate `dpor-beacon` (`beacon/src/h2c.rs`), and
///      `contracts/test/beacon/` checks both against real drand evmnet rounds (docs/BEACON.md).
library BN254 {
    /// @notice The base field modulus p.
    uint256 internal constant P = 0x30644e72e131a029b85045b68181585d97816a916871ca8d3c208c16d87cfd47;
    /// @notice (p + 1) / 4: a^((p+1)/4) is a square root of a when one exists (p = 3 mod 4).
    uint256 internal constant SQRT_EXP = 0xc19139cb84c680a6e14116da060561765e05aa45a1c72a34f082305b61f3f52;
    /// @notice p - 2: a^(p-2) = 1/a for a != 0, and 0 for a = 0 (inv0 of RFC 9380 §4).
    uint256 internal constant INV_EXP = 0x30644e72e131a029b85045b68181585d97816a916871ca8d3c208c16d87cfd45;
    /// @notice 2^256 mod p, to reduce a 48-byte big-endian integer split across words.
    uint256 internal constant TWO_256_MOD_P = 0xe0a77c19a07df2f666ea36f7879462c0a78eb28f5c70b3dd35d438dc58f0d9d;

    /// @notice SVDW constants for y^2 = x^3 + 3, Z = 1 (RFC 9380 §6.6.1; values as in kevincharm/bls-bn254):
    ///         C1 = g(Z) = 4; C2 = -Z/2; C3 = sqrt(-g(Z) * 3 Z^2) with sgn0(C3) = 0; C4 = -4 g(Z) / (3 Z^2).
    uint256 internal constant C1 = 4;
    uint256 internal constant C2 = 0x183227397098d014dc2822db40c0ac2ecbc0b548b438e5469e10460b6c3e7ea3;
    uint256 internal constant C3 = 0x16789af3a83522eb353c98fc6b36d713d5d8d1cc5dffffffa;
    uint256 internal constant C4 = 0x10216f7ba065e00de81ac1e7808072c9dd2b2385cd7b438469602eb24829a9bd;

    /// @notice -g2, the negated G2 generator (EIP-197 order x.c1, x.c0, y.c1, y.c0).
    uint256 internal constant NEG_G2_X1 = 0x198e9393920d483a7260bfb731fb5d25f1aa493335a9e71297e485b7aef312c2;
    uint256 internal constant NEG_G2_X0 = 0x1800deef121f1e76426a00665e5c4479674322d4f75edadd46debd5cd992f6ed;
    uint256 internal constant NEG_G2_Y1 = 0x275dc4a288d1afb3cbb1ac09187524c7db36395df7be3b99e673b13a075a65ec;
    uint256 internal constant NEG_G2_Y0 = 0x1d9befcd05a5323e6da4d435f3b617cdb3af83285c2df711ef39c01571827f9d;

    /// @notice The twist's b' = 3 / (9 + i) (real, imaginary).
    uint256 internal constant B2_RE = 0x2b149d40ceb8aaae81be18991be06ac3b5b4c5e559dbefa33267e6dc24a138e5;
    uint256 internal constant B2_IM = 0x009713b03af0fed4cd2cafadeed8fdf4a74fa084e52d1852e4a2bd0685c315d2;

    /// @notice A precompile call failed (out of gas, or a point the precompile rejects).
    error PrecompileFailed(uint256 precompile);
    /// @notice The domain separation tag is longer than 255 bytes (RFC 9380 §5.3.1).
    error DstTooLong();

    // ------------------------------------------------------------------ hash to field

    /// @notice expand_message_xmd(message, dst, 96) with H = keccak256 (RFC 9380 §5.3.1): returns the three
    ///         32-byte blocks b1, b2, b3.
    /// @dev keccak256's block (s_in_bytes) is 136 bytes, so Z_pad is 136 zero bytes.
    function expandMsg96(bytes memory dst, bytes memory message) internal pure returns (bytes32 b1, bytes32 b2, bytes32 b3) {
        if (dst.length > 255) revert DstTooLong();
        bytes memory dstPrime = abi.encodePacked(dst, uint8(dst.length));
        bytes32 b0 = keccak256(abi.encodePacked(new bytes(136), message, uint16(96), uint8(0), dstPrime));
        b1 = keccak256(abi.encodePacked(b0, uint8(1), dstPrime));
        b2 = keccak256(abi.encodePacked(b0 ^ b1, uint8(2), dstPrime));
        b3 = keccak256(abi.encodePacked(b0 ^ b2, uint8(3), dstPrime));
    }

    /// @notice hash_to_field(message, 2) over the base field (RFC 9380 §5.2): u0 = OS2IP(bytes 0..48) mod p,
    ///         u1 = OS2IP(bytes 48..96) mod p of the 96 expanded bytes.
    function hashToField(bytes memory dst, bytes memory message) internal pure returns (uint256 u0, uint256 u1) {
        (bytes32 b1, bytes32 b2, bytes32 b3) = expandMsg96(dst, message);
        // bytes 0..48 = b1 || b2[0..16]: b1 * 2^128 + (b2 >> 128)
        u0 = addmod(mulmod(uint256(b1), 1 << 128, P), uint256(b2) >> 128, P);
        // bytes 48..96 = b2[16..32] || b3: (b2 mod 2^128) * 2^256 + b3
        u1 = addmod(mulmod(uint256(b2) & type(uint128).max, TWO_256_MOD_P, P), uint256(b3) % P, P);
    }

    // ------------------------------------------------------------------ field helpers

    /// @notice base^exponent mod p through the modexp precompile (EIP-198).
    function expModP(uint256 base, uint256 exponent) internal view returns (uint256 result) {
        bool ok;
        assembly ("memory-safe") {
            let m := mload(0x40)
            mstore(m, 0x20)
            mstore(add(m, 0x20), 0x20)
            mstore(add(m, 0x40), 0x20)
            mstore(add(m, 0x60), base)
            mstore(add(m, 0x80), exponent)
            mstore(add(m, 0xa0), P)
            ok := staticcall(gas(), 0x05, m, 0xc0, m, 0x20)
            result := mload(m)
        }
        if (!ok) revert PrecompileFailed(0x05);
    }

    /// @notice g(x) = x^3 + 3 mod p.
    function g(uint256 x) internal pure returns (uint256) {
        return addmod(mulmod(mulmod(x, x, P), x, P), 3, P);
    }

    /// @notice A square root of a (a < p) if a is a square: (root, true); otherwise (_, false).
    function sqrt(uint256 a) internal view returns (uint256 root, bool isSquare) {
        root = expModP(a, SQRT_EXP);
        isSquare = mulmod(root, root, P) == a;
    }

    // ------------------------------------------------------------------ map and hash to G1

    /// @notice map_to_curve_svdw(u) (RFC 9380 §6.6.1, straight-line form of appendix F.1): a point of G1 for any
    ///         u < p. x1 has priority over x2 over x3; the sign of y is fixed so that sgn0(y) = sgn0(u).
    function mapToPoint(uint256 u) internal view returns (uint256 x, uint256 y) {
        uint256 tv1 = mulmod(mulmod(u, u, P), C1, P);
        uint256 tv2 = addmod(1, tv1, P);
        tv1 = addmod(1, P - tv1, P);
        uint256 tv3 = expModP(mulmod(tv1, tv2, P), INV_EXP);
        uint256 tv4 = mulmod(mulmod(mulmod(u, tv1, P), tv3, P), C3, P);
        bool found;
        x = addmod(C2, P - tv4, P); // x1
        (y, found) = sqrt(g(x));
        if (!found) {
            x = addmod(C2, tv4, P); // x2
            (y, found) = sqrt(g(x));
            if (!found) {
                uint256 tv5 = mulmod(mulmod(tv2, tv2, P), tv3, P);
                x = addmod(mulmod(C4, mulmod(tv5, tv5, P), P), 1, P); // x3 = Z + C4 * (tv2^2 * tv3)^2
                (y, found) = sqrt(g(x));
                // RFC 9380 §6.6.1: g(x3) is a square whenever g(x1) and g(x2) are not.
                assert(found);
            }
        }
        if ((u & 1) != (y & 1)) y = (P - y) % P;
    }

    /// @notice hash_to_curve(message) into G1 (RFC 9380 §3, random-oracle encoding; G1 has cofactor 1).
    function hashToG1(bytes memory dst, bytes memory message) internal view returns (uint256 x, uint256 y) {
        (uint256 u0, uint256 u1) = hashToField(dst, message);
        (uint256 x0, uint256 y0) = mapToPoint(u0);
        (uint256 x1, uint256 y1) = mapToPoint(u1);
        return ecAdd(x0, y0, x1, y1);
    }

    /// @notice (x0, y0) + (x1, y1) on G1 through the ecAdd precompile (EIP-196).
    function ecAdd(uint256 x0, uint256 y0, uint256 x1, uint256 y1) internal view returns (uint256 x, uint256 y) {
        bool ok;
        assembly ("memory-safe") {
            let m := mload(0x40)
            mstore(m, x0)
            mstore(add(m, 0x20), y0)
            mstore(add(m, 0x40), x1)
            mstore(add(m, 0x60), y1)
            ok := staticcall(gas(), 0x06, m, 0x80, m, 0x40)
            x := mload(m)
            y := mload(add(m, 0x20))
        }
        if (!ok) revert PrecompileFailed(0x06);
    }

    // ------------------------------------------------------------------ point checks

    /// @notice True iff (x, y) is a canonical encoding of a G1 point other than the identity: x, y < p and
    ///         y^2 = x^3 + 3. (G1 has cofactor 1: on the curve means in the group.)
    function isValidG1(uint256 x, uint256 y) internal pure returns (bool) {
        if (x >= P || y >= P) return false;
        if (x == 0 && y == 0) return false;
        return mulmod(y, y, P) == g(x);
    }

    /// @notice True iff the four words (x.c1, x.c0, y.c1, y.c0) are canonical, not the identity, and satisfy
    ///         the twist equation y^2 = x^3 + b' over Fp2 = Fp[i]/(i^2 + 1). Does not check the subgroup: see
    ///         `isInG2Subgroup`.
    function isOnTwist(uint256[4] memory q) internal pure returns (bool) {
        (uint256 xi, uint256 xr, uint256 yi, uint256 yr) = (q[0], q[1], q[2], q[3]);
        if (xi >= P || xr >= P || yi >= P || yr >= P) return false;
        if ((xi | xr | yi | yr) == 0) return false;
        // x^3 = (xr^3 - 3 xr xi^2) + (3 xr^2 xi - xi^3) i
        uint256 xr2 = mulmod(xr, xr, P);
        uint256 xi2 = mulmod(xi, xi, P);
        uint256 re = mulmod(xr, addmod(xr2, P - mulmod(3, xi2, P), P), P);
        uint256 im = mulmod(xi, addmod(mulmod(3, xr2, P), P - xi2, P), P);
        re = addmod(re, B2_RE, P);
        im = addmod(im, B2_IM, P);
        // y^2 = (yr + yi)(yr - yi) + 2 yr yi i
        uint256 y2re = mulmod(addmod(yr, yi, P), addmod(yr, P - yi, P), P);
        uint256 y2im = mulmod(mulmod(2, yr, P), yi, P);
        return re == y2re && im == y2im;
    }

    /// @notice True iff a point already on the twist is in the order-r subgroup G2: the pairing precompile
    ///         rejects G2 inputs outside the subgroup (EIP-197), so e(g1, q) * e(-g1, q) == 1 succeeds exactly for
    ///         subgroup points. The call gets a fixed allowance, because a rejected input burns all the gas given.
    function isInG2Subgroup(uint256[4] memory q) internal view returns (bool) {
        uint256[12] memory input = [uint256(1), 2, q[0], q[1], q[2], q[3], 1, P - 2, q[0], q[1], q[2], q[3]];
        uint256[1] memory out;
        bool ok;
        assembly ("memory-safe") {
            ok := staticcall(150000, 0x08, input, 0x180, out, 0x20)
        }
        return ok && out[0] == 1;
    }

    /// @notice The BLS check e(sig, -g2) * e(h, pk) == 1, i.e. e(sig, g2) == e(h, pk). All points must be valid
    ///         (checked by the caller), else the precompile fails and this reverts.
    function pairingCheck(uint256 sx, uint256 sy, uint256 hx, uint256 hy, uint256[4] memory pk)
        internal
        view
        returns (bool)
    {
        uint256[12] memory input =
            [sx, sy, NEG_G2_X1, NEG_G2_X0, NEG_G2_Y1, NEG_G2_Y0, hx, hy, pk[0], pk[1], pk[2], pk[3]];
        uint256[1] memory out;
        bool ok;
        assembly ("memory-safe") {
            ok := staticcall(gas(), 0x08, input, 0x180, out, 0x20)
        }
        if (!ok) revert PrecompileFailed(0x08);
        return out[0] == 1;
    }
}
