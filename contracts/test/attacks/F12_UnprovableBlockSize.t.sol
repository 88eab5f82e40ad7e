// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest, BlockProof} from "../../src/lib/DporTypes.sol";

/// @notice Second review, finding 1 (high): the owner chooses β (up to 1 MiB). At 1 MiB
///         one epoch proof is 1.2 MB of calldata and about 64 M gas: no transaction can
///         carry it. The node accepted such a deal, missed every epoch and was
///         terminated; the owner took its escrow back and the whole collateral.
///         Now `openDeal` refuses β·K > 64 KiB ({EpochProofTooLarge}), and the largest
///         deal it accepts is provable: its epoch proof, built and submitted here, costs
///         far less than EIP-7825's cap of 2^24 gas per transaction.
contract F12_UnprovableBlockSize is MarketFixture {
    /// EIP-7825: the most gas one transaction may use (Fusaka).
    uint256 internal constant TX_GAS_CAP = 1 << 24;
    /// EIP-7623: the floor price of a non-zero calldata byte (4 tokens × 10 gas).
    uint256 internal constant FLOOR_GAS_PER_BYTE = 40;

    function test_attack_oneMebibyteBlocksRefused() public {
        vm.prank(owner);
        vm.expectRevert(IDporMarket.EpochProofTooLarge.selector);
        market.openDeal(provider, 4, 1 << 20, 16, 1, 10, PRICE, COLLATERAL);
    }

    /// The bound is on β·K, the data one proof carries: 64 KiB blocks with two samples
    /// (or 16 KiB blocks with eight) are refused too; exactly 64 KiB is accepted.
    function test_attack_boundIsOnBlockSizeTimesSamples() public {
        uint32[3] memory betas = [uint32(1 << 16), uint32(1 << 14) + 1, uint32(8193)];
        uint8[3] memory ks = [uint8(2), uint8(4), uint8(8)];
        for (uint256 i; i < betas.length; ++i) {
            vm.prank(owner);
            vm.expectRevert(IDporMarket.EpochProofTooLarge.selector);
            market.openDeal(provider, 4, betas[i], 16, ks[i], 10, PRICE, COLLATERAL);
        }
        vm.assertEq(market.getDeal(_open(4, 1 << 16, 1, 10)).blockSize, 1 << 16);
        vm.assertEq(market.getDeal(_open(4, 1 << 13, 8, 10)).samplesPerEpoch, 8);
    }

    /// The largest accepted deal (β = 64 KiB, K = 1) is provable: its epoch proof goes
    /// through, and its gas (execution measured + calldata at the EIP-7623 floor, an
    /// upper bound for random data) stays under 5 M (4.4 M measured), under a third of
    /// the per-transaction cap.
    function test_largestAcceptedDealIsProvable() public {
        // N = 1 and no H level: the test's own tree building (memory never freed in
        // the EVM) stays small; the proof's size and cost do not depend on N.
        uint256 id = _openAccepted(1, 1 << 16, 1, 4);
        Digest memory d = _postReal(id, 1, 0);
        _enterEpoch(id, 0);
        BlockProof[] memory ps = _epochProofs(id, 0, d);
        bytes memory data = abi.encodeCall(market.submitEpochProof, (id, 0, d, ps));
        uint256 before = gasleft();
        market.submitEpochProof(id, 0, d, ps);
        uint256 execution = before - gasleft();
        uint256 txGas = 21_000 + execution + data.length * FLOOR_GAS_PER_BYTE;
        vm.assertEq(uint256(market.epochStatus(id, 0)), uint256(IDporMarket.EpochStatus.Proven));
        vm.assertLt(txGas, 5_000_000);
        vm.assertLt(txGas, TX_GAS_CAP);
        vm.assertLt(data.length, 80_000);
        emit log_named_uint("calldata bytes", data.length);
        emit log_named_uint("execution gas", execution);
        emit log_named_uint("transaction gas (calldata at the floor)", txGas);
    }
}
