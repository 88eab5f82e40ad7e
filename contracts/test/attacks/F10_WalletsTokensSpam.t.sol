// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {FeeToken, Wallet1271} from "../utils/Mocks.sol";
import {IDporMarket, IDporMarketFull} from "../../src/market/IDporMarket.sol";
import {DporMarket} from "../../src/DporMarket.sol";
import {IRandomnessBeacon} from "../../src/market/IRandomnessBeacon.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Digest, MarketParams} from "../../src/lib/DporTypes.sol";

/// @notice Finding 10 (low): smart-contract wallets, fee-on-transfer tokens, unbonded
///         audit records, the uint64 dispute deadline.
contract F10_WalletsTokensSpam is MarketFixture {
    /// An ERC-1271 wallet can own a deal: its signer's signature is accepted through
    /// isValidSignature, and refused when the wallet refuses.
    function test_attack_contractWalletOwner() public {
        uint256 signerPk = 0x5151;
        Wallet1271 w = new Wallet1271(vm.addr(signerPk));
        token.mint(address(w), 1e24);
        w.exec(address(token), abi.encodeCall(IERC20.approve, (address(market), type(uint256).max)));
        bytes memory ret =
            w.exec(address(market), abi.encodeCall(market.openDeal, (provider, 4, BETA, 16, 1, 5, PRICE, COLLATERAL)));
        uint256 id = abi.decode(ret, (uint256));
        vm.prank(provider);
        market.acceptDeal(id);
        Digest memory d = buildDigest(id, 1, 4, 0, 0, BETA);
        bytes32 h = market.digestHash(d);
        bytes memory ws = _sig(signerPk, h);
        bytes memory ps = _sig(PROVIDER_PK, h);
        // an EOA signature of another key is not the wallet's
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.postDigest(d, _sig(OWNER_PK, h), ps);
        w.setRefuse(true);
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.postDigest(d, ws, ps);
        w.setRefuse(false);
        market.postDigest(d, ws, ps);
        vm.assertEq(market.getDeal(id).digestVersion, 1);
    }

    /// A fee-on-transfer token is rejected at the first pull (stake, escrow, collateral, bond).
    function test_attack_feeOnTransferToken() public {
        FeeToken ft = new FeeToken();
        IDporMarketFull m = IDporMarketFull(
            address(new DporMarket(IERC20(address(ft)), IRandomnessBeacon(address(beacon)), _params()))
        );
        ft.mint(provider, 1e24);
        vm.startPrank(provider);
        ft.approve(address(m), type(uint256).max);
        vm.expectRevert(IDporMarket.UnsupportedToken.selector);
        m.register(hex"01", _addrs(), PRICE, COLLATERAL, CAPACITY, MIN_STAKE);
        vm.stopPrank();
    }

    /// Audit records are unbonded but harmless: a thousand spam records change no deal,
    /// no balance, no dispute; each names its author.
    function test_attack_recordAuditSpam() public {
        uint256 id = _openAccepted(4, BETA, 1, 5);
        Digest memory d = _postReal(id, 1, 0);
        IDporMarket.Deal memory before = market.getDeal(id);
        uint256 bal = token.balanceOf(address(market));
        vm.startPrank(stranger);
        for (uint256 i; i < 200; ++i) market.recordAudit(id, uint64(i % 5), 1, false, bytes32(i));
        vm.stopPrank();
        IDporMarket.Deal memory afterSpam = market.getDeal(id);
        vm.assertEq(keccak256(abi.encode(afterSpam)), keccak256(abi.encode(before)));
        vm.assertEq(token.balanceOf(address(market)), bal);
        vm.assertEq(market.disputeCount(), 0);
        vm.assertEq(market.getAudit(200).auditor, stranger);
        _prove(id, 0, d); // proofs are unaffected
    }

    /// The answer window is capped (365 days), so a dispute deadline can never wrap a uint64.
    function test_attack_hugeAnswerWindow() public {
        MarketParams memory p = _params();
        p.answerSeconds = type(uint64).max - 10;
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        new DporMarket(IERC20(address(token)), IRandomnessBeacon(address(beacon)), p);
        p.answerSeconds = 365 days;
        IDporMarketFull m =
            IDporMarketFull(address(new DporMarket(IERC20(address(token)), IRandomnessBeacon(address(beacon)), p)));
        vm.assertEq(m.answerSeconds(), 365 days);
        uint256 id = _openAccepted(4, BETA, 1, 5);
        _postReal(id, 1, 0);
        vm.prank(challenger);
        uint256 q = market.openDispute(id, 0, 1, 0, 0, 0, 0);
        vm.assertEq(market.getDispute(q).deadline, block.timestamp + ANSWER);
    }
}
