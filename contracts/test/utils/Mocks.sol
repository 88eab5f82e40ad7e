// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/// @notice A token that burns 1 % of every transfer (fee on transfer).
contract FeeToken is ERC20 {
    constructor() ERC20("fee", "FEE") {}

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function _update(address from, address to, uint256 value) internal override {
        if (from != address(0) && to != address(0)) {
            uint256 fee = value / 100;
            super._update(from, address(0), fee);
            value -= fee;
        }
        super._update(from, to, value);
    }
}

/// @notice A smart-contract wallet (ERC-1271) controlled by one ECDSA key; it can be
///         told to refuse every signature.
contract Wallet1271 is IERC1271 {
    address public immutable signer;
    bool public refuse;

    constructor(address signer_) {
        signer = signer_;
    }

    function setRefuse(bool r) external {
        refuse = r;
    }

    function isValidSignature(bytes32 hash, bytes memory signature) external view returns (bytes4) {
        if (refuse) return 0xffffffff;
        (address got, ECDSA.RecoverError err,) = ECDSA.tryRecover(hash, signature);
        return err == ECDSA.RecoverError.NoError && got == signer ? IERC1271.isValidSignature.selector : bytes4(0xffffffff);
    }

    /// @dev Executes an arbitrary call as the wallet (approve, openDeal, ...).
    function exec(address to, bytes calldata data) external returns (bytes memory) {
        (bool ok, bytes memory ret) = to.call(data);
        if (!ok) {
            assembly ("memory-safe") {
                revert(add(ret, 32), mload(ret))
            }
        }
        return ret;
    }
}
