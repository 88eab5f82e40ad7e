// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Digest, SampleProof, BlockProof} from "../../src/lib/DporTypes.sol";
import {DporDigest} from "../../src/lib/DporDigest.sol";
import {DporMerkle} from "../../src/lib/DporMerkle.sol";
import {DporSampling} from "../../src/lib/DporSampling.sol";

/// @notice Exposes the libraries' calldata functions to tests.
contract LibHarness {
    function verifySample(Digest calldata d, SampleProof calldata p, uint256 chunks, uint256 depth)
        external
        pure
        returns (bool)
    {
        return DporDigest.verifySample(d, p, chunks, depth);
    }

    function blockRootOf(bytes calldata blk) external pure returns (bytes32) {
        return DporMerkle.blockRootCalldata(blk);
    }

    function verifyBlock(Digest calldata d, BlockProof calldata p, uint256 blockBytes) external pure returns (bool) {
        return DporDigest.verifyBlock(d, p, blockBytes);
    }

    function structHash(Digest calldata d) external pure returns (bytes32) {
        return DporDigest.structHash(d);
    }

    function chunkRoot(bytes calldata chunk, uint256 index, bytes32[] calldata path) external pure returns (bytes32) {
        return DporMerkle.processPath(DporMerkle.chunkLeafCalldata(chunk), index, path);
    }

    function runRoot(uint256 position, bytes32 blockRoot, bytes32[] calldata path) external pure returns (bytes32) {
        return DporMerkle.processPath(DporMerkle.runLeaf(position, blockRoot), position, path);
    }
}
