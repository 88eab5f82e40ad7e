//! Writes the shared test vectors (`contracts/test/fixtures/vectors.json`) that the
//! Solidity tests check the contracts against (ENCODING.md). Deterministic: `script/test`
//! regenerates the file and fails if it differs from the committed one.
//!
//! Usage: `cargo run -p dpor-core --example gen_vectors > contracts/test/fixtures/vectors.json`

use alloy_primitives::{address, Address, B256, U256};
use dpor_core::audit::{epoch_block_samples, RunTag};
use dpor_core::block::BlockFormat;
use dpor_core::checksum::{OwnerKeys, Place};
use dpor_core::digest::{Digest, Resize};
use dpor_core::merkle::{self, MerkleTree};
use dpor_core::state::ServerState;
use serde_json::{json, Value};

const CHAIN_ID: u64 = 31337;
const CONTRACT: Address = address!("0x5FbDB2315678afecb367f032d93F642f64180aa3");

fn hex0x(b: &[u8]) -> String {
    format!("0x{}", hex::encode(b))
}

fn bytes(len: usize, salt: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(salt * 97) >> 13) as u8).collect()
}

fn roots(path: &[B256]) -> Value {
    Value::Array(path.iter().map(|h| json!(h.to_string())).collect())
}

fn digest_json(d: &Digest) -> Value {
    json!({
        "dealId": d.dealId.to::<u64>(), "version": d.version, "numBlocks": d.numBlocks,
        "writeCount": d.writeCount, "rebuildCount": d.rebuildCount,
        "rootU": d.rootU.to_string(), "rootC": d.rootC.to_string(), "levelRoots": roots(&d.levelRoots),
        "structHash": d.struct_hash().to_string(), "digestHash": d.digest_hash(CHAIN_ID, CONTRACT).to_string(),
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let format = BlockFormat::new(4096)?;
    let coded = format.coded_block_bytes();

    let block_roots: Vec<Value> = [1usize, 128, 129, 4096, coded]
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let b = bytes(len, i as u32);
            json!({"data": hex0x(&b), "root": merkle::block_root(&b).to_string()})
        })
        .collect();

    let block = bytes(coded, 9);
    let chunk_proofs: Vec<Value> = [0u64, 17, 36]
        .iter()
        .map(|&c| -> Result<Value, merkle::MerkleError> {
            let (chunk, path) = merkle::chunk_proof(&block, c)?;
            Ok(json!({"block": hex0x(&block), "chunkIndex": c, "chunk": hex0x(&chunk), "path": roots(&path),
                "blockRoot": merkle::block_root(&block).to_string()}))
        })
        .collect::<Result<_, _>>()?;

    // A real file of N = 4 blocks after 3 writes: C (8 coded blocks), levels 0 and 1.
    let keys = OwnerKeys::derive(&[0x42; 32], format.width());
    let u: Vec<Vec<u8>> = (0..4).map(|i| bytes(4096, 100 + i)).collect();
    let mut state = ServerState::new(format, u)?;
    for (k, i) in [2u64, 0, 3].iter().enumerate() {
        state.write(*i, bytes(4096, 200 + k as u32))?;
    }
    let run_bytes = |blocks: &[dpor_core::Fp]| -> Result<Vec<Vec<u8>>, dpor_core::block::BlockError> {
        blocks.chunks_exact(format.width()).map(|b| format.coded_to_bytes(b)).collect()
    };
    let mut runs: Vec<(RunTag, Vec<Vec<u8>>, MerkleTree)> = Vec::new();
    for run in state.runs() {
        let b = run_bytes(&run.blocks)?;
        let tree = merkle::run_tree(&b)?;
        runs.push((run.tag, b, tree));
    }
    let sealed: Vec<[u8; 32]> = state
        .u()
        .iter()
        .enumerate()
        .map(|(i, b)| -> Result<[u8; 32], Box<dyn std::error::Error>> {
            let sigma = keys.checksum(&format.record(i as u64, b)?)?;
            Ok(keys.seal(Place::U { index: i as u64 }, &sigma))
        })
        .collect::<Result<_, _>>()?;
    let u_tree = merkle::u_tree(state.u(), &sealed)?;
    let real = Digest {
        dealId: U256::from(1u64),
        version: 1,
        numBlocks: state.num_blocks(),
        writeCount: state.write_count(),
        rebuildCount: state.rebuild_count(),
        rootU: u_tree.root(),
        rootC: runs[0].2.root(),
        levelRoots: runs[1..].iter().map(|r| r.2.root()).collect(),
    };
    real.validate()?;
    let other = Digest {
        dealId: U256::from(7u64),
        version: 12,
        numBlocks: 1 << 20,
        writeCount: 0b1011,
        rebuildCount: 3,
        rootU: B256::repeat_byte(0x11),
        rootC: B256::repeat_byte(0x22),
        levelRoots: vec![B256::repeat_byte(0x31), B256::repeat_byte(0x32), B256::repeat_byte(0x33)],
    };
    let empty = Digest { dealId: U256::from(2u64), version: 1, numBlocks: 1, writeCount: 0, rebuildCount: 0,
        rootU: B256::repeat_byte(3), rootC: B256::repeat_byte(4), levelRoots: vec![] };

    let run_proofs: Vec<Value> = [(0usize, 0u64), (0, 5), (1, 1), (2, 3)]
        .iter()
        .map(|&(r, p)| -> Result<Value, merkle::MerkleError> {
            let (_, b, tree) = &runs[r];
            Ok(json!({"size": tree.len(), "position": p, "blockRoot": merkle::block_root(&b[p as usize]).to_string(),
                "path": roots(&tree.path(p)?), "root": tree.root().to_string()}))
        })
        .collect::<Result<_, _>>()?;

    // Resize typed data (App. A.3, docs/CONTRACTS.md "Resizing"): the digest index it
    // carries, the terms, and the signing hash both parties sign.
    let resizes: Vec<Value> = [(2usize, 5u128, 7u128), (2, u128::MAX, 0)]
        .iter()
        .map(|&(i, price, collateral)| {
            let d = [&real, &other, &empty][i].clone();
            let r = Resize { digest: d, pricePerEpoch: price, collateral };
            json!({"digestIndex": i, "pricePerEpoch": price.to_string(), "collateral": collateral.to_string(),
                "signingHash": r.signing_hash(CHAIN_ID, CONTRACT).to_string()})
        })
        .collect();

    let real_hash = real.digest_hash(CHAIN_ID, CONTRACT);
    let mut epoch = Vec::new();
    let mut sample_proofs = Vec::new();
    for (s, (n, t, dh)) in [(4u64, real.writeCount, real_hash), (1 << 20, 0b1011, other.digest_hash(CHAIN_ID, CONTRACT)), (1, 0, B256::ZERO)]
        .iter()
        .enumerate()
    {
        let seed = alloy_primitives::keccak256([s as u8; 32]);
        let samples = epoch_block_samples(seed, *dh, *n, *t, 4);
        epoch.push(json!({"seed": seed.to_string(), "digestHash": dh.to_string(), "numBlocks": n, "writeCount": t,
            "codedBlockBytes": coded, "count": 4,
            "runTags": samples.iter().map(|x| x.tag.0).collect::<Vec<_>>(),
            "positions": samples.iter().map(|x| x.position).collect::<Vec<_>>()}));
        if s == 0 {
            // Dispute-style chunk proofs (the challenger names the chunk) at the epoch's samples.
            let chunks = dpor_core::merkle::chunk_count(coded) as u64;
            for (j, x) in samples.into_iter().enumerate() {
                let chunk_index = (x.position * 7 + j as u64 * 11) % chunks;
                let (_, b, tree) = runs.iter().find(|r| r.0 == x.tag).ok_or("sample names a run not in the digest")?;
                let (chunk, chunk_path) = merkle::chunk_proof(&b[x.position as usize], chunk_index)?;
                sample_proofs.push(json!({"digestIndex": 0, "seed": seed.to_string(), "runTag": x.tag.0, "position": x.position,
                    "chunkIndex": chunk_index, "chunk": hex0x(&chunk), "chunkPath": roots(&chunk_path),
                    "runPath": roots(&tree.path(x.position)?)}));
            }
        }
    }

    let out = json!({
        "domain": {"chainId": CHAIN_ID, "verifyingContract": CONTRACT.to_string(), "name": "dpor", "version": "1"},
        "blockSize": format.block_bytes(),
        "codedBlockBytes": coded,
        "blockRoots": block_roots,
        "chunkProofs": chunk_proofs,
        "runProofs": run_proofs,
        "digests": [digest_json(&real), digest_json(&other), digest_json(&empty)],
        "resizes": resizes,
        "epochSamples": epoch,
        "sampleProofs": sample_proofs,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
