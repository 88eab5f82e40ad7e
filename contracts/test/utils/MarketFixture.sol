// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {TestBase} from "./Vm.sol";
import {TestToken} from "../../src/token/TestToken.sol";
import {DporMarket} from "../../src/DporMarket.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Digest, SampleProof} from "../../src/lib/DporTypes.sol";
import {DporMerkle} from "../../src/lib/DporMerkle.sol";
import {DporSampling} from "../../src/lib/DporSampling.sol";

/// @notice Builds real run trees for small deals (every coded block distinct) and the
///         digests and sample proofs over them.
abstract contract TreeKit {
    /// @dev Coded block `pos` of run `tag`, `len` bytes, deterministic pseudo-random content.
    function codedBlock(uint256 tag, uint256 pos, uint256 len) internal pure returns (bytes memory b) {
        b = new bytes(len + 32);
        for (uint256 i; i < len; i += 32) {
            bytes32 w = keccak256(abi.encode(tag, pos, i));
            assembly ("memory-safe") {
                mstore(add(add(b, 32), i), w)
            }
        }
        assembly ("memory-safe") {
            mstore(b, len)
        }
    }

    function runLeaves(uint256 tag, uint256 size, uint256 len) internal pure returns (bytes32[] memory leaves) {
        leaves = new bytes32[](size);
        for (uint256 p; p < size; ++p) {
            leaves[p] = DporMerkle.runLeaf(p, DporMerkle.blockRoot(codedBlock(tag, p, len)));
        }
    }

    function runRoot(uint256 tag, uint256 size, uint256 len) internal pure returns (bytes32) {
        return DporMerkle.rootOfLeaves(runLeaves(tag, size, len));
    }

    /// @dev A digest over real trees: N blocks, write count t, coded blocks of β = blockSize.
    function buildDigest(uint256 dealId, uint64 version, uint64 n, uint64 t, uint64 rebuilds, uint256 blockSize)
        internal
        pure
        returns (Digest memory d)
    {
        uint256 len = DporSampling.codedBlockBytes(blockSize);
        d.dealId = dealId;
        d.version = version;
        d.numBlocks = n;
        d.writeCount = t;
        d.rebuildCount = rebuilds;
        d.rootU = keccak256(abi.encode("U", dealId, version));
        d.rootC = runRoot(0, 2 * n, len);
        d.levelRoots = new bytes32[](DporSampling.popcount(t));
        uint256 k;
        for (uint256 l; l < 64; ++l) {
            if ((t >> l) & 1 == 1) d.levelRoots[k++] = runRoot(l + 1, uint256(1) << (l + 1), len);
        }
    }

    /// @dev The proof of (tag, pos, chunkIndex) in the trees of {buildDigest}.
    function buildProof(uint256 tag, uint256 pos, uint256 chunkIndex, uint64 n, uint256 blockSize)
        internal
        pure
        returns (SampleProof memory p)
    {
        uint256 len = DporSampling.codedBlockBytes(blockSize);
        bytes memory blk = codedBlock(tag, pos, len);
        p.runTag = uint8(tag);
        p.position = uint64(pos);
        p.chunkIndex = uint32(chunkIndex);
        p.chunk = DporMerkle.chunkAt(blk, chunkIndex);
        p.chunkPath = DporMerkle.pathOf(DporMerkle.chunkLeaves(blk), chunkIndex);
        p.runPath = DporMerkle.pathOf(runLeaves(tag, DporSampling.runSize(tag, n), len), pos);
    }
}

/// @notice Deploys the token and the market and registers a provider.
abstract contract MarketFixture is TestBase, TreeKit {
    TestToken internal token;
    DporMarket internal market;

    uint256 internal constant OWNER_PK = 0xA11CE;
    uint256 internal constant PROVIDER_PK = 0xB0B;
    uint256 internal constant STRANGER_PK = 0x5757;
    address internal owner;
    address internal provider;
    address internal stranger;
    address internal challenger = address(0xC4A11);

    uint64 internal constant EPOCH_BLOCKS = 10;
    uint64 internal constant DISPUTE_WINDOW = 20;
    uint128 internal constant BOND = 100e18;
    uint16 internal constant SHARE_BPS = 5000;
    uint16 internal constant MAX_FAILURES = 3;
    uint256 internal constant MIN_STAKE = 1000e18;
    uint128 internal constant PRICE = 1e18;
    uint128 internal constant COLLATERAL = 6e18;
    uint64 internal constant CAPACITY = 1 << 22;
    uint32 internal constant BETA = 200; // coded block 240 bytes, 2 chunks

    function setUp() public virtual {
        owner = vm.addr(OWNER_PK);
        provider = vm.addr(PROVIDER_PK);
        stranger = vm.addr(STRANGER_PK);
        token = new TestToken();
        market = new DporMarket(
            IERC20(address(token)), EPOCH_BLOCKS, DISPUTE_WINDOW, BOND, SHARE_BPS, MAX_FAILURES, MIN_STAKE
        );
        address[4] memory who = [owner, provider, stranger, challenger];
        for (uint256 i; i < who.length; ++i) {
            token.mint(who[i], 1e30);
            vm.prank(who[i]);
            token.approve(address(market), type(uint256).max);
        }
        vm.prank(provider);
        market.register(hex"0024080112", _addrs(), PRICE, COLLATERAL, CAPACITY, MIN_STAKE);
    }

    function _addrs() internal pure returns (string[] memory a) {
        a = new string[](2);
        a[0] = "/ip4/127.0.0.1/tcp/4001";
        a[1] = "/ip4/127.0.0.1/udp/4001/quic-v1";
    }

    function _open(uint64 n, uint32 beta, uint8 k, uint32 epochs) internal returns (uint256 id) {
        vm.prank(owner);
        id = market.openDeal(provider, n, beta, 16, k, epochs, PRICE);
    }

    function _openAccepted(uint64 n, uint32 beta, uint8 k, uint32 epochs) internal returns (uint256 id) {
        id = _open(n, beta, k, epochs);
        vm.prank(provider);
        market.acceptDeal(id);
    }

    function _sig(uint256 pk, bytes32 h) internal pure returns (bytes memory) {
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(pk, h);
        return abi.encodePacked(r, s, v);
    }

    function _post(Digest memory d) internal {
        bytes32 h = market.digestHash(d);
        market.postDigest(d, _sig(OWNER_PK, h), _sig(PROVIDER_PK, h));
    }

    /// @dev Posts a real digest (version v, write count t) for deal `id`.
    function _postReal(uint256 id, uint64 v, uint64 t) internal returns (Digest memory d) {
        IDporMarket.Deal memory deal = market.getDeal(id);
        d = buildDigest(id, v, deal.numBlocks, t, 0, deal.blockSize);
        _post(d);
    }

    /// @dev Rolls into epoch `e`'s window (first block after its seed block).
    function _enterEpoch(uint256 id, uint64 e) internal {
        (uint256 seedBlock,) = market.epochWindow(id, e);
        if (block.number <= seedBlock) vm.roll(seedBlock + 1);
    }

    /// @dev The K proofs of epoch `e` against digest `d` (built with {buildDigest}).
    function _epochProofs(uint256 id, uint64 e, Digest memory d) internal view returns (SampleProof[] memory ps) {
        IDporMarket.Deal memory deal = market.getDeal(id);
        ps = new SampleProof[](deal.samplesPerEpoch);
        for (uint256 j; j < ps.length; ++j) {
            (uint8 tag, uint64 pos, uint32 ci) = market.epochSample(id, e, j);
            ps[j] = buildProof(tag, pos, ci, d.numBlocks, deal.blockSize);
        }
    }

    function _prove(uint256 id, uint64 e, Digest memory d) internal {
        _enterEpoch(id, e);
        market.submitEpochProof(id, e, d, _epochProofs(id, e, d));
    }
}
