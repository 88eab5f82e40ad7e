// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title DporMerkle
/// @notice Tree hashing of docs/ENCODING.md §2-§3: 128-byte chunk leaves
///         keccak256(0x00 ‖ chunk), bytes32(0) padding leaves, nodes
///         keccak256(0x01 ‖ left ‖ right), run leaves keccak256(0x02 ‖ u64be(p) ‖ blockRoot).
///         Paths list siblings from the leaf up; bit i of the index says the node at
///         height i is a right child.
library DporMerkle {
    /// @dev Size of a chunk in bytes.
    uint256 internal constant CHUNK = 128;

    /// @notice Inner node hash keccak256(0x01 ‖ l ‖ r).
    function node(bytes32 l, bytes32 r) internal pure returns (bytes32 h) {
        assembly ("memory-safe") {
            let p := mload(0x40)
            mstore8(p, 0x01)
            mstore(add(p, 1), l)
            mstore(add(p, 33), r)
            h := keccak256(p, 65)
        }
    }

    /// @notice Chunk leaf keccak256(0x00 ‖ chunk) of a 128-byte chunk in calldata.
    /// @dev The caller checks chunk.length == 128.
    function chunkLeafCalldata(bytes calldata chunk) internal pure returns (bytes32 h) {
        assembly ("memory-safe") {
            let p := mload(0x40)
            mstore8(p, 0x00)
            calldatacopy(add(p, 1), chunk.offset, 128)
            h := keccak256(p, 129)
        }
    }

    /// @notice Block root (ENCODING §2) of a whole block in calldata: 128-byte chunks
    ///         (the last zero-padded), leaves keccak256(0x00 ‖ chunk), bytes32(0)
    ///         padding leaves up to a power of two, nodes keccak256(0x01 ‖ l ‖ r).
    /// @dev Uses memory past the free pointer as scratch (w words + 129 bytes,
    ///      w = next power of two ≥ ⌈len/128⌉). Empty input gives bytes32(0) (callers
    ///      check the length).
    function blockRootCalldata(bytes calldata blk) internal pure returns (bytes32 root) {
        uint256 len = blk.length;
        uint256 n = (len + 127) / 128;
        uint256 w = 1;
        while (w < n) w <<= 1;
        assembly ("memory-safe") {
            let leaves := mload(0x40)
            let buf := add(leaves, mul(w, 0x20))
            let off := blk.offset
            for { let i := 0 } lt(i, n) { i := add(i, 1) } {
                let start := mul(i, 128)
                let rem := sub(len, start)
                mstore8(buf, 0)
                if lt(rem, 128) {
                    mstore(add(buf, 1), 0)
                    mstore(add(buf, 33), 0)
                    mstore(add(buf, 65), 0)
                    mstore(add(buf, 97), 0)
                }
                if gt(rem, 128) { rem := 128 }
                calldatacopy(add(buf, 1), add(off, start), rem)
                mstore(add(leaves, mul(i, 0x20)), keccak256(buf, 129))
            }
            for { let i := n } lt(i, w) { i := add(i, 1) } { mstore(add(leaves, mul(i, 0x20)), 0) }
            mstore8(buf, 1)
            for {} gt(w, 1) {} {
                w := shr(1, w)
                for { let i := 0 } lt(i, w) { i := add(i, 1) } {
                    let src := add(leaves, mul(i, 0x40))
                    mstore(add(buf, 1), mload(src))
                    mstore(add(buf, 33), mload(add(src, 0x20)))
                    mstore(add(leaves, mul(i, 0x20)), keccak256(buf, 65))
                }
            }
            root := mload(leaves)
            if iszero(n) { root := 0 }
        }
    }

    /// @notice Chunk leaf keccak256(0x00 ‖ chunk) of a 128-byte chunk in memory.
    function chunkLeaf(bytes memory chunk) internal pure returns (bytes32) {
        require(chunk.length == CHUNK, "chunk length");
        return keccak256(abi.encodePacked(bytes1(0x00), chunk));
    }

    /// @notice Run leaf keccak256(0x02 ‖ u64be(position) ‖ blockRoot).
    function runLeaf(uint256 position, bytes32 root) internal pure returns (bytes32 h) {
        assembly ("memory-safe") {
            let p := mload(0x40)
            mstore8(p, 0x02)
            mstore(add(p, 1), shl(192, position))
            mstore(add(p, 9), root)
            h := keccak256(p, 41)
        }
    }

    /// @notice Folds a calldata path from `leaf` at `index` up to the root.
    /// @dev The caller checks index < 2^path.length.
    function processPath(bytes32 leaf, uint256 index, bytes32[] calldata path) internal pure returns (bytes32 h) {
        h = leaf;
        uint256 n = path.length;
        for (uint256 i; i < n; ++i) {
            bytes32 s = path[i];
            h = (index & 1 == 1) ? node(s, h) : node(h, s);
            index >>= 1;
        }
    }

    /// @notice Memory variant of {processPath}.
    function processPathMemory(bytes32 leaf, uint256 index, bytes32[] memory path) internal pure returns (bytes32 h) {
        h = leaf;
        for (uint256 i; i < path.length; ++i) {
            h = (index & 1 == 1) ? node(path[i], h) : node(h, path[i]);
            index >>= 1;
        }
    }

    /// @notice Root of a tree over `leaves` padded with bytes32(0) to a power of two.
    function rootOfLeaves(bytes32[] memory leaves) internal pure returns (bytes32) {
        uint256 w = 1;
        while (w < leaves.length) w <<= 1;
        bytes32[] memory level = new bytes32[](w);
        for (uint256 i; i < leaves.length; ++i) level[i] = leaves[i];
        while (w > 1) {
            w >>= 1;
            for (uint256 i; i < w; ++i) level[i] = node(level[2 * i], level[2 * i + 1]);
        }
        return level[0];
    }

    /// @notice The 128-byte chunk `i` of `data`, zero-padded past its end.
    function chunkAt(bytes memory data, uint256 i) internal pure returns (bytes memory c) {
        c = new bytes(CHUNK);
        uint256 start = i * CHUNK;
        for (uint256 k; k < CHUNK && start + k < data.length; ++k) c[k] = data[start + k];
    }

    /// @notice Chunk leaves of a block (ENCODING §2), without padding leaves.
    function chunkLeaves(bytes memory data) internal pure returns (bytes32[] memory leaves) {
        uint256 n = (data.length + CHUNK - 1) / CHUNK;
        leaves = new bytes32[](n);
        for (uint256 i; i < n; ++i) leaves[i] = chunkLeaf(chunkAt(data, i));
    }

    /// @notice Block root of `data` (ENCODING §2). Not used on-chain; for tests and clients.
    function blockRoot(bytes memory data) internal pure returns (bytes32) {
        return rootOfLeaves(chunkLeaves(data));
    }

    /// @notice Sibling path of leaf `index` in the tree over `leaves` (padded to a power of two).
    function pathOf(bytes32[] memory leaves, uint256 index) internal pure returns (bytes32[] memory path) {
        uint256 w = 1;
        uint256 d;
        while (w < leaves.length) {
            w <<= 1;
            ++d;
        }
        bytes32[] memory level = new bytes32[](w);
        for (uint256 i; i < leaves.length; ++i) level[i] = leaves[i];
        path = new bytes32[](d);
        for (uint256 h; h < d; ++h) {
            path[h] = level[index ^ 1];
            w >>= 1;
            for (uint256 i; i < w; ++i) level[i] = node(level[2 * i], level[2 * i + 1]);
            index >>= 1;
        }
    }
}
