// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title TestToken
/// @notice ERC-20 used for escrow, collateral, stakes and bonds on a local chain.
///         Anyone may mint: it has no value and must never be deployed to a public chain.
contract TestToken is ERC20 {
    /// @notice Emitted when tokens are minted through {mint}.
    event Minted(address indexed to, uint256 amount);

    constructor() ERC20("dpor test token", "DPOR") {}

    /// @notice Mints `amount` tokens to `to`. Callable by anyone (test token).
    /// @param to Recipient.
    /// @param amount Amount in base units (18 decimals).
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
        emit Minted(to, amount);
    }
}
