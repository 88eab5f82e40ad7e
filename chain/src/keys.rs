//! Private keys: parsing, and the well-known anvil development keys.

use crate::error::ChainError;
use alloy::signers::local::PrivateKeySigner;

/// The private keys of anvil's ten default accounts (mnemonic "test test … junk").
///
/// **Local chains only**: these keys are public; anything sent to their addresses on
/// a real network is taken by bots within seconds. Account 0 deploys the contracts in
/// `contracts/script/Deploy.s.sol`.
pub const ANVIL_KEYS: [&str; 10] = [
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
    "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
    "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
];

/// Parses a secp256k1 private key given as 64 hex digits (`0x` prefix optional,
/// surrounding whitespace ignored).
///
/// Errors: [`ChainError::InvalidKey`] if it is not 32 bytes of hex or not a valid scalar.
/// The message never contains the key.
pub fn parse_key(hex: &str) -> Result<PrivateKeySigner, ChainError> {
    let s = hex.trim();
    let s = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ChainError::InvalidKey(format!("expected 64 hex digits, got {} characters", s.len())));
    }
    s.parse::<PrivateKeySigner>().map_err(|_| ChainError::InvalidKey("not a valid secp256k1 scalar".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anvil_key_0_is_the_deployer() {
        let k = parse_key(ANVIL_KEYS[0]).unwrap();
        assert_eq!(format!("{:?}", k.address()), "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266");
    }

    #[test]
    fn all_anvil_keys_parse_and_differ() {
        let mut addrs: Vec<_> = ANVIL_KEYS.iter().map(|k| parse_key(k).unwrap().address()).collect();
        addrs.sort();
        addrs.dedup();
        assert_eq!(addrs.len(), 10);
    }

    #[test]
    fn rejects_bad_keys() {
        assert!(parse_key("0x1234").is_err());
        assert!(parse_key(&"zz".repeat(32)).is_err());
        assert!(parse_key(&"00".repeat(32)).is_err());
        assert!(parse_key(&ANVIL_KEYS[1][2..]).is_ok());
    }
}
