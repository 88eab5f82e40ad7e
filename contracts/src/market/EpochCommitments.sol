// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketBase} from "./MarketBase.sol";
import {Digest, BlockProof} from "../lib/DporTypes.sol";
import {DporCommitment} from "../lib/DporCommitment.sol";
import {DporMerkle} from "../lib/DporMerkle.sol";
import {DporFenwick} from "../lib/DporFenwick.sol";

/// @title EpochCommitments
/// @notice One commitment per provider per global epoch over its responses for all its
///         deals, challenges of single entries, safety draws, and the payment of
///         committed epochs once their challenge window has closed (docs/COMMITMENTS.md);
///         also {closeDeal}, which runs the same settlement first.
/// @dev Runs as the commitments extension ({DporCommitmentsExt}) by delegatecall in the
///      market's storage (MarketBase layout; it declares no state). Every state-changing
///      function starts with {_onlyHome}.
abstract contract EpochCommitments is MarketBase {
    /// @notice A provider's commitment draws one of its deals for an on-chain proof with
    ///         probability 1/SAFETY_PERIOD per global epoch, each deal with probability
    ///         its numBlocks / the provider's total blocks (docs/COMMITMENTS.md §5).
    uint256 public constant SAFETY_PERIOD = 16;

    /// @notice Commits the caller's responses of global epoch `g` for all its deals: the
    ///         Merkle root over one leaf per deal epoch at g with a digest in force at
    ///         start_g, sorted by deal id, padded with zero leaves to a power of two
    ///         (docs/COMMITMENTS.md §1–§2; bytes32(0) for no leaf). Stores the seed of g
    ///         if needed and runs the safety draw (§5), which may open a challenge.
    /// @dev Only a registered provider ({NotRegistered}) for itself; only inside g's
    ///      window [start_g, start_g + epochSeconds) ({EpochNotStarted}, {EpochClosed});
    ///      once per (provider, g) ({CommitmentExists}); seed(g) available
    ///      ({SeedUnavailable}). Gas does not depend on the number D of deals except
    ///      when the draw hits (1 in 16): then a Fenwick descent of ⌊log2 D⌋ + 1 reads.
    ///      Emits {EpochCommitted} (and {ChallengeOpened} for a safety draw).
    /// @param g The global epoch (the current one).
    /// @param root The tree's root.
    /// @param leafCount Leaves before padding (informative, emitted, not checked).
    function commitEpoch(uint64 g, bytes32 root, uint32 leafCount) external {
        _onlyHome();
        if (!_providers[msg.sender].registered) revert NotRegistered();
        uint256 start = _globalStart(g);
        if (block.timestamp < start) revert EpochNotStarted();
        if (block.timestamp >= start + epochSeconds) revert EpochClosed();
        ProviderBook storage b = _books[msg.sender];
        uint256 w = b.committed[g >> 8];
        uint256 bit = uint256(1) << (g & 255);
        if (w & bit != 0) revert CommitmentExists();
        b.committed[g >> 8] = w | bit;
        if (root != bytes32(0)) b.roots[g] = root;
        bytes32 seed = _touchGlobalSeed(g);
        uint256 safetyId = _safetyDraw(b, seed, g);
        emit EpochCommitted(msg.sender, g, root, leafCount, safetyId);
    }

    /// @notice The root `provider` committed for global epoch `g`, and whether it committed.
    function getCommitment(address provider, uint64 g) external view returns (bytes32 root, bool committed) {
        committed = _isCommitted(provider, g);
        root = _books[provider].roots[g];
    }

    /// @notice The provider's Active deals in list order (the order of the safety draw's
    ///         cumulative weights, {safetyDrawTarget}).
    function providerDeals(address provider) external view returns (uint256[] memory) {
        return _books[provider].deals;
    }

    /// @notice The deal the safety draw picks at weight offset `x` (docs/COMMITMENTS.md §5):
    ///         the one at the list position p of {providerDeals} with
    ///         Σ_{i<p} numBlocks_i ≤ x < Σ_{i≤p} numBlocks_i over the current list; 0 when
    ///         x ≥ the provider's current total (blocks), which the draw treats as no draw.
    /// @param provider The provider.
    /// @param x A weight offset, blocks (the draw's (r >> 128) % W).
    /// @return dealId The deal at x, or 0.
    function safetyDrawTarget(address provider, uint256 x) external view returns (uint256 dealId) {
        ProviderBook storage b = _books[provider];
        if (x >= _providers[provider].usedBlocks) return 0;
        return b.deals[DporFenwick.find(b.tree, b.deals.length, x)];
    }

    /// @notice W, in blocks, of `provider`'s safety draw for global epoch `g` if it ran
    ///         now, g being the current epoch: the total numBlocks of its Active deals at
    ///         the start of g. For a past g, the total at the start of the last epoch with
    ///         a change if that was g, else the current total.
    /// @param provider The provider.
    /// @param g The global epoch (the current one).
    /// @return weight Blocks.
    function safetyDrawWeight(address provider, uint64 g) external view returns (uint256 weight) {
        ProviderBook storage b = _books[provider];
        return b.changedEpoch == g ? b.weightAtChange : _providers[provider].usedBlocks;
    }

    /// @notice Challenges deal epoch `epoch`'s entry in its provider's commitment,
    ///         locking {disputeBond} from the caller (approve first). The provider must
    ///         answer with the epoch's whole-block proof and the entry's leaf path within
    ///         {answerSeconds} (docs/COMMITMENTS.md §3).
    /// @dev Anyone. Deal Active ({WrongDealState}); epoch < numEpochs ({EpochOutOfRange});
    ///      the provider committed g = startEpoch + epoch ({NotCommitted}); a digest in
    ///      force at start_g ({NoDigest}); now < start_g + epochSeconds + graceSeconds
    ///      ({ChallengePeriodOver}); the epoch unsettled ({EpochSettled}). Marks it
    ///      Challenged and counts it in the deal's open disputes (closeDeal waits).
    ///      Emits {ChallengeOpened}.
    /// @param dealId The deal.
    /// @param epoch The deal epoch (0-based; global epoch startEpoch + epoch).
    /// @return challengeId The new challenge's id.
    function challengeEntry(uint256 dealId, uint64 epoch) external nonReentrant returns (uint256 challengeId) {
        _onlyHome();
        Deal storage d = _activeDeal(dealId);
        (, uint256 deadline) = _window(d, epoch);
        if (!_isCommitted(d.provider, uint256(d.startEpoch) + epoch)) revert NotCommitted();
        if (epoch < _firstFaultable(d)) revert NoDigest();
        if (block.timestamp >= deadline + graceSeconds) revert ChallengePeriodOver();
        uint128 bond = disputeBond;
        challengeId = _openChallenge(dealId, d, epoch, msg.sender, bond);
        if (bond > 0) _pullTokens(msg.sender, bond);
    }

    /// @notice Answers a challenge: `d` is the digest in force at the epoch's start,
    ///         `proofs` the K whole-block proofs of the epoch, and `leafPath` the path of
    ///         the entry's leaf (docs/COMMITMENTS.md §1) at `leafIndex` to the committed
    ///         root. The epoch is Proven, the provider credited its price from escrow and
    ///         the challenger's bond.
    /// @dev Anyone (normally the provider; the pay goes to the provider whoever sends
    ///      it), until the deadline (inclusive, {DeadlinePassed}). Reverts
    ///      {UnknownDispute} / {DisputeNotOpen} for an unknown / settled challenge,
    ///      {DigestMismatch} / {DigestNotInForce} for a wrong digest, the verifier's
    ///      {WrongSampleCount} / {WrongSample} / {WrongBlockLength} / {InvalidProof} for
    ///      wrong blocks, {NotInCommitment} when the path does not give the root.
    ///      Emits {ChallengeAnswered}.
    /// @param challengeId The challenge.
    /// @param d Preimage of the digest in force at the epoch's start (its version is the leaf's v).
    /// @param proofs The K whole-block proofs of the epoch, j = 0..K−1 (as submitEpochProof).
    /// @param leafIndex The leaf's index in the committed tree (bit i: right child at height i).
    /// @param leafPath Siblings from the leaf up (log2 of the padded leaf count).
    function answerChallenge(
        uint256 challengeId,
        Digest calldata d,
        BlockProof[] calldata proofs,
        uint256 leafIndex,
        bytes32[] calldata leafPath
    ) external {
        _onlyHome();
        Challenge storage c = _liveChallenge(challengeId);
        if (block.timestamp > c.deadline) revert DeadlinePassed();
        uint256 dealId = c.dealId;
        uint64 epoch = c.epoch;
        Deal storage deal = _deals[dealId];
        _checkEntry(dealId, deal, epoch, d, proofs);
        if (DporMerkle.processPath(_leafOf(dealId, deal, epoch, d, proofs), leafIndex, leafPath)
            != _books[deal.provider].roots[deal.startEpoch + epoch]) revert NotInCommitment();
        c.state = ChallengeState.Answered;
        _endChallenge(dealId, deal, epoch, EpochStatus.Proven);
        uint128 pay = deal.pricePerEpoch < deal.escrow ? deal.pricePerEpoch : deal.escrow;
        deal.escrow -= pay;
        uint128 bond = c.bond;
        emit ChallengeAnswered(challengeId, dealId, epoch, pay, bond);
        _credit(deal.provider, uint256(pay) + bond);
    }

    /// @notice Settles an unanswered challenge after its deadline: the epoch is Missed,
    ///         its escrow goes back to the owner and one fault is slashed,
    ///         {challengerShareBps} of it plus the bond to the challenger, the rest to the
    ///         owner (all of it to the owner for a safety draw). Enough faults terminate
    ///         the deal.
    /// @dev Anyone, once ({DisputeNotOpen} after, {UnknownDispute} for an unknown id),
    ///      only after the deadline ({DeadlineNotPassed}). Emits {ChallengeFaulted} (and
    ///      {DealTerminated} on the maxFailures-th fault).
    /// @param challengeId The challenge.
    function faultChallenge(uint256 challengeId) external {
        _onlyHome();
        Challenge storage c = _liveChallenge(challengeId);
        if (block.timestamp <= c.deadline) revert DeadlineNotPassed();
        c.state = ChallengeState.Faulted;
        uint256 dealId = c.dealId;
        uint64 epoch = c.epoch;
        Deal storage deal = _deals[dealId];
        _endChallenge(dealId, deal, epoch, EpochStatus.Missed);
        uint128 refund = deal.pricePerEpoch < deal.escrow ? deal.pricePerEpoch : deal.escrow;
        deal.escrow -= refund;
        uint128 amount = _fault(deal, 1);
        address challenger = c.challenger;
        uint128 toChallenger =
            challenger == address(0) ? 0 : uint128((uint256(amount) * challengerShareBps) / 10_000);
        uint128 toOwner = amount - toChallenger + refund;
        emit ChallengeFaulted(challengeId, dealId, epoch, toChallenger, toOwner);
        if (challenger != address(0)) _credit(challenger, uint256(toChallenger) + c.bond);
        _credit(deal.owner, toOwner);
        _maybeTerminate(dealId, deal);
    }

    /// @notice The challenge `challengeId` (state None if unknown). Anyone.
    function getChallenge(uint256 challengeId) external view returns (Challenge memory) {
        return _challenges[challengeId];
    }

    /// @notice Number of challenges; ids are 1..challengeCount.
    function challengeCount() external view returns (uint256) {
        return _challengeCount;
    }

    /// @notice Pays the committed epochs of deal `dealId` whose challenge window has
    ///         closed: each deal epoch e in [claimCursor, min(upTo, numEpochs)) with
    ///         start_e + epochSeconds + graceSeconds ≤ now (it stops at the first that is
    ///         not), unsettled, with a digest in force and whose global epoch the provider
    ///         committed, becomes Proven and the provider is credited its price from
    ///         escrow. Other epochs are left as they are. Advances the claim cursor
    ///         (docs/COMMITMENTS.md §4).
    /// @dev Anyone; deal Active ({WrongDealState}). A few hundred gas per epoch plus one
    ///      storage write per 128 epochs. Emits {EpochsClaimed} when the cursor moves.
    /// @param dealId The deal.
    /// @param upTo Deal epoch to stop before (exclusive; capped at numEpochs).
    function claimEpochs(uint256 dealId, uint64 upTo) external {
        _onlyHome();
        _claim(dealId, _activeDeal(dealId), upTo);
    }

    /// @notice Closes an active deal once its last deadline + {graceSeconds} has passed
    ///         (finding 6) and no dispute is open. Every epoch that had a digest in force
    ///         and was never settled is a fault now (finding 5): its slash goes to the
    ///         owner, and enough faults terminate the deal (the owner then also gets the
    ///         remaining collateral). Otherwise the provider is credited its remaining
    ///         collateral. The owner always gets the unspent escrow (unproven and
    ///         dropped epochs). Pull with {withdraw}.
    ///         First it runs {claimEpochs}' settlement over the epochs not claimed yet
    ///         (docs/COMMITMENTS.md §4): committed, unchallenged epochs with a digest in
    ///         force are Proven and paid; an epoch of a global epoch the provider did not
    ///         commit stays unsettled and is a fault.
    /// @dev Anyone (commitments extension). After the settlement loop (a few hundred gas
    ///      per unclaimed epoch: call claimEpochs in steps first for a very long deal),
    ///      O(1): unsettled faultable epochs = (epochs starting after the first digest) −
    ///      `settledWithDigest`. Reverts {DealNotOver}, {DisputesOpen} (open disputes or
    ///      challenges), {WrongDealState}.
    function closeDeal(uint256 dealId) external {
        _onlyHome();
        Deal storage d = _activeDeal(dealId);
        if (block.timestamp < _lastDeadline(d) + graceSeconds) revert DealNotOver();
        if (d.openDisputes != 0) revert DisputesOpen();
        _claim(dealId, d, d.numEpochs);
        uint256 first = _firstFaultable(d);
        uint256 faultable = first < d.numEpochs ? d.numEpochs - first : 0;
        uint256 faults = faultable - d.settledWithDigest;
        uint128 slashed = faults > 0 ? _fault(d, faults) : 0;
        (uint128 esc, uint128 col) = _drain(d);
        if (d.failures >= maxFailures) {
            d.state = DealState.Terminated;
            emit DealClosed(dealId, uint32(faults), slashed, 0, 0);
            emit DealTerminated(dealId, d.failures, esc, col);
            _credit(d.owner, uint256(esc) + slashed + col);
        } else {
            d.state = DealState.Completed;
            emit DealClosed(dealId, uint32(faults), slashed, esc, col);
            _credit(d.owner, uint256(esc) + slashed);
            _credit(d.provider, col);
        }
    }

    /// @dev Marks `epoch` Challenged (reverts {EpochSettled} if settled), counts it as an
    ///      open dispute of the deal and records a challenge answerable until now +
    ///      {answerSeconds}.
    function _openChallenge(uint256 dealId, Deal storage d, uint64 epoch, address challenger, uint128 bond)
        internal
        returns (uint256 id)
    {
        uint256 shift = (uint256(epoch) & 127) * 2;
        uint256 w = _epochBits[dealId][epoch >> 7];
        if ((w >> shift) & 3 != 0) revert EpochSettled();
        _epochBits[dealId][epoch >> 7] = w | (uint256(EpochStatus.Challenged) << shift);
        d.openDisputes += 1;
        id = ++_challengeCount;
        Challenge storage c = _challenges[id];
        c.dealId = dealId;
        c.epoch = epoch;
        c.challenger = challenger;
        c.bond = bond;
        uint64 deadline = uint64(block.timestamp + answerSeconds); // answerSeconds ≤ 365 days: no wrap
        c.deadline = deadline;
        c.state = ChallengeState.Open;
        emit ChallengeOpened(id, dealId, epoch, challenger, deadline, bond);
    }

    /// @dev Turns a Challenged epoch into `s` (Proven or Missed; it had a digest in force)
    ///      and closes the deal's open dispute.
    function _endChallenge(uint256 dealId, Deal storage d, uint64 epoch, EpochStatus s) internal {
        uint256 shift = (uint256(epoch) & 127) * 2;
        uint256 w = _epochBits[dealId][epoch >> 7];
        _epochBits[dealId][epoch >> 7] = (w & ~(uint256(3) << shift)) | (uint256(s) << shift);
        d.settledWithDigest += 1;
        d.openDisputes -= 1;
    }

    /// @dev Checks `d` is the deal epoch's digest in force and `proofs` its K whole-block proofs.
    function _checkEntry(
        uint256 dealId,
        Deal storage deal,
        uint64 epoch,
        Digest calldata d,
        BlockProof[] calldata proofs
    ) internal view {
        if (d.dealId != dealId) revert DigestMismatch();
        uint64 g = deal.startEpoch + epoch;
        bytes32 dh = _checkInForce(dealId, d, _globalStart(g));
        verifier.verifyEpoch(_sampleSeed(globalSeeds[g], dealId, epoch), dh, d, proofs, deal.samplesPerEpoch, deal.blockSize);
    }

    /// @dev The commitment leaf of the answer (docs/COMMITMENTS.md §1).
    function _leafOf(uint256 dealId, Deal storage deal, uint64 epoch, Digest calldata d, BlockProof[] calldata proofs)
        internal
        view
        returns (bytes32)
    {
        bytes32 seed = _sampleSeed(globalSeeds[deal.startEpoch + epoch], dealId, epoch);
        return DporCommitment.leaf(dealId, epoch, d.version, DporCommitment.responseHashOf(seed, proofs));
    }

    function _liveChallenge(uint256 id) internal view returns (Challenge storage c) {
        c = _challenges[id];
        if (c.state == ChallengeState.None) revert UnknownDispute();
        if (c.state != ChallengeState.Open) revert DisputeNotOpen();
    }

    /// @dev The safety draw of docs/COMMITMENTS.md §5 for the caller's commitment of g:
    ///      r = keccak256(abi.encode(seed(g), provider, "dpor.safety")); if r % 16 == 0,
    ///      x = (r >> 128) % W, W = the provider's total blocks at the start of g, and the
    ///      deal whose interval of the cumulative numBlocks of the list contains x (a deal
    ///      is drawn with probability numBlocks / W; Fenwick descent, O(log D) reads) is
    ///      challenged by the market (challenger 0, bond 0) when it has an unsettled epoch
    ///      at g with a digest in force. Returns the challenge id, 0 if none.
    function _safetyDraw(ProviderBook storage b, bytes32 seed, uint64 g) internal returns (uint256) {
        uint256 r = uint256(keccak256(abi.encode(seed, msg.sender, "dpor.safety")));
        if (r % SAFETY_PERIOD != 0) return 0;
        uint256 total = _providers[msg.sender].usedBlocks;
        uint256 w = b.changedEpoch == g ? b.weightAtChange : total;
        if (w == 0) return 0;
        uint256 x = (r >> 128) % w;
        if (x >= total) return 0; // deals released or shrunk during g lowered the total
        uint256 dealId = b.deals[DporFenwick.find(b.tree, b.deals.length, x)];
        Deal storage d = _deals[dealId];
        if (d.startEpoch > g) return 0; // accepted during g (moved into the draw by a release)
        uint256 e = g - d.startEpoch;
        if (e >= d.numEpochs || e < _firstFaultable(d)) return 0;
        if (_epochStatus(dealId, e) != EpochStatus.None) return 0;
        return _openChallenge(dealId, d, uint64(e), address(0), 0);
    }

    /// @dev The settlement of {claimEpochs} over [claimCursor, min(upTo, numEpochs, the
    ///      epochs whose challenge window has closed)).
    function _claim(uint256 dealId, Deal storage d, uint256 upTo) internal {
        uint256 from = d.claimCursor;
        uint256 end = d.numEpochs;
        if (upTo < end) end = upTo;
        // Global epochs g with start_g + P + grace ≤ now are the g < closed.
        uint256 t = block.timestamp - genesis;
        uint256 closed = t >= graceSeconds ? (t - graceSeconds) / epochSeconds : 0;
        uint256 lim = closed > d.startEpoch ? closed - d.startEpoch : 0;
        if (lim < end) end = lim;
        if (end <= from) return;
        uint256 first = _firstFaultable(d);
        uint256 count = _markCommitted(
            _epochBits[dealId], _books[d.provider].committed, d.startEpoch, from > first ? from : first, end
        );
        d.claimCursor = uint32(end);
        uint128 pay;
        if (count > 0) {
            d.settledWithDigest += uint32(count);
            uint256 want = uint256(d.pricePerEpoch) * count;
            pay = want < d.escrow ? uint128(want) : d.escrow;
            d.escrow -= pay;
        }
        emit EpochsClaimed(dealId, uint64(from), uint64(end), uint32(count), pay);
        _credit(d.provider, pay);
    }

    /// @dev Marks Proven every unsettled deal epoch in [e, end) whose global epoch
    ///      (sg + e) is in the `committed` bitmap; returns how many. One read per 128
    ///      epochs of status bits (one write if changed) and per 256 global epochs of
    ///      commitment bits.
    function _markCommitted(
        mapping(uint256 => uint256) storage bits,
        mapping(uint256 => uint256) storage committed,
        uint256 sg,
        uint256 e,
        uint256 end
    ) internal returns (uint256 count) {
        uint256 wi = type(uint256).max;
        uint256 w;
        uint256 ci = type(uint256).max;
        uint256 cw;
        bool dirty;
        // unchecked: e < end ≤ 2^32, sg < 2^64, shifts < 256, count ≤ end
        unchecked {
            for (; e < end; ++e) {
                if (e >> 7 != wi) {
                    if (dirty) bits[wi] = w;
                    wi = e >> 7;
                    w = bits[wi];
                    dirty = false;
                }
                uint256 shift = (e & 127) << 1;
                if ((w >> shift) & 3 != 0) continue;
                uint256 g = sg + e;
                if (g >> 8 != ci) {
                    ci = g >> 8;
                    cw = committed[ci];
                }
                if ((cw >> (g & 255)) & 1 == 0) continue;
                w |= uint256(EpochStatus.Proven) << shift;
                dirty = true;
                ++count;
            }
        }
        if (dirty) bits[wi] = w;
    }
}
