// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "./utils/MarketFixture.sol";
import {IDporMarket} from "./../src/market/IDporMarket.sol";
import {Digest, BlockProof} from "../src/lib/DporTypes.sol";

/// @notice Fuzz: the digest in force for an epoch is the last one posted strictly before
///         its start, whatever the posting times; only that digest proves the epoch.
contract DigestHistoryTest is MarketFixture {
    /// @dev Posts up to 6 digests at fuzzed times over 4 epochs, then checks every epoch
    ///      against a reference scan of (version, postedAt).
    function testFuzz_inForceIsLastBeforeStart(uint32[6] memory gaps, uint8 count) public {
        uint256 id = _openAccepted(2, BETA, 1, 4);
        uint256 n = 1 + count % 6;
        uint64[6] memory versions;
        uint256[6] memory times;
        uint64 v;
        for (uint256 i; i < n; ++i) {
            vm.warp(block.timestamp + gaps[i] % (EPOCH + 1)); // 0 .. one epoch, same second allowed
            v += 1 + uint64(gaps[i] % 3);
            _postReal(id, v, uint64(i % 2));
            versions[i] = v;
            times[i] = block.timestamp;
        }
        for (uint64 e; e < 4; ++e) {
            (uint256 start,) = market.epochWindow(id, e);
            uint64 want;
            for (uint256 i; i < n; ++i) if (times[i] < start) want = versions[i];
            (uint64 got, bytes32 h,) = market.digestInForce(id, e);
            vm.assertEq(got, want, "digest in force");
            if (want != 0) vm.assertEq(h, market.getDigestRecord(id, want).digestHash);
        }
    }

    /// @dev Only the digest in force proves the epoch; every other posted one is refused.
    function testFuzz_onlyInForceProves(uint32 a, uint32 b) public {
        uint256 id = _openAccepted(2, BETA, 1, 3);
        Digest memory d1 = _postReal(id, 1, 0);
        (uint256 start,) = market.epochWindow(id, 1);
        vm.warp(start - 1 - a % (EPOCH - 1)); // during epoch 0, before epoch 1
        Digest memory d2 = _postReal(id, 2, 1);
        vm.warp(start + b % (EPOCH - 1)); // during epoch 1
        Digest memory d3 = _postReal(id, 3, 0);
        BlockProof[] memory ps = _epochProofs(id, 1, d2);
        vm.expectRevert(IDporMarket.DigestNotInForce.selector);
        market.submitEpochProof(id, 1, d1, ps);
        vm.expectRevert(IDporMarket.DigestNotInForce.selector);
        market.submitEpochProof(id, 1, d3, ps);
        market.submitEpochProof(id, 1, d2, ps);
        _prove(id, 2, d3);
    }
}
