// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title DporFenwick
/// @notice A Fenwick (binary indexed) tree of 64-bit weights over the positions 1..len of
///         a list, packed four nodes per storage word: node k (1-based) holds the sum of
///         the weights of positions (k − lowbit(k), k] and sits in bits 64·(k & 3) of
///         word k >> 2. Nodes above `len` are 0 (a pop clears its node), so a push only
///         has to sum the children of its new node. The market keeps one per provider,
///         weights = the numBlocks of its Active deals (docs/COMMITMENTS.md §5).
/// @dev Every sum of weights must fit 64 bits (the market's weights are a provider's
///      blocks, bounded by its uint64 `usedBlocks`). Additions are modulo 2^64 within a
///      node, so a negative delta is passed as its two's complement
///      (`uint64(a) - uint64(b)` computed unchecked).
library DporFenwick {
    uint256 private constant LANE = 0xffffffffffffffff;

    /// @notice Node k (1-based) of tree `t`: the weights of positions (k − lowbit(k), k].
    function node(mapping(uint256 => uint256) storage t, uint256 k) internal view returns (uint256) {
        return (t[k >> 2] >> ((k & 3) << 6)) & LANE;
    }

    /// @notice Adds `delta` (modulo 2^64: a negative delta as its two's complement) to the
    ///         weight of position k (1-based) of a tree of `len` positions: every node
    ///         k, k + lowbit(k), … up to `len`. ⌈log2(len)⌉ + 1 words read and written at most.
    function add(mapping(uint256 => uint256) storage t, uint256 k, uint256 delta, uint256 len) internal {
        assembly ("memory-safe") {
            mstore(0x20, t.slot)
            for {} iszero(gt(k, len)) { k := add(k, and(k, sub(0, k))) } {
                mstore(0, shr(2, k))
                let p := keccak256(0, 0x40)
                let w := sload(p)
                let s := shl(6, and(k, 3))
                sstore(p, xor(w, shl(s, and(xor(add(shr(s, w), delta), shr(s, w)), LANE))))
            }
        }
    }

    /// @notice Appends position k = len + 1 with weight `weight` to a tree of len positions:
    ///         node k = weight + the nodes of positions (k − lowbit(k), k − 1]
    ///         (trailing-zero count of k reads; one on average). Node k must be 0.
    function push(mapping(uint256 => uint256) storage t, uint256 k, uint256 weight) internal {
        assembly ("memory-safe") {
            mstore(0x20, t.slot)
            let low := sub(k, and(k, sub(0, k)))
            for { let j := sub(k, 1) } gt(j, low) { j := sub(j, and(j, sub(0, j))) } {
                mstore(0, shr(2, j))
                weight := add(weight, shr(shl(6, and(j, 3)), sload(keccak256(0, 0x40))))
            }
        }
        add(t, k, weight, k);
    }

    /// @notice Removes the last position `len` of a tree of len positions: clears node len
    ///         (the caller has already moved the weight it keeps, see the market's _release).
    function pop(mapping(uint256 => uint256) storage t, uint256 len) internal {
        assembly ("memory-safe") {
            mstore(0, shr(2, len))
            mstore(0x20, t.slot)
            let p := keccak256(0, 0x40)
            sstore(p, and(sload(p), not(shl(shl(6, and(len, 3)), LANE))))
        }
    }

    /// @notice The 0-based position p whose interval [prefix(p), prefix(p) + weight(p)) of
    ///         the cumulative weights contains x, for a tree of `len` ≥ 1 positions and
    ///         x < the total weight (else it returns len). Fenwick descent:
    ///         ⌊log2(len)⌋ + 1 node reads.
    function find(mapping(uint256 => uint256) storage t, uint256 len, uint256 x) internal view returns (uint256 pos) {
        uint256 step = 1;
        unchecked {
            while (step << 1 <= len) step <<= 1;
            for (; step != 0; step >>= 1) {
                uint256 k = pos + step;
                if (k > len) continue;
                uint256 v = node(t, k);
                if (v <= x) {
                    pos = k;
                    x -= v;
                }
            }
        }
    }
}
