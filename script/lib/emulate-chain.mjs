// script/lib/emulate-chain.mjs: what script/emulate reads from the chain, many calls at
// once (viem over JSON-RPC, batched), where one `cast` per call would take minutes at
// 50+ nodes and hundreds of files. Run by script/emulate only:
//
//   node emulate-chain.mjs pending  RPC MARKET ROLES MODE  what an honest live node still
//        has to settle in the current global epoch g. MODE "deal" (per-deal proofs): deals
//        with an epoch at g and a digest in force not yet Proven; prints "N" then up to 5
//        "deal provider". MODE "commit" (epoch commitments, docs/COMMITMENTS.md): providers
//        with such a deal whose commitment of g is not on chain (getCommitment); prints
//        "N" then up to 5 "provider"
//   node emulate-chain.mjs nodes    RPC MARKET ROLES       one line per provider of ROLES,
//        in its order: "address registered activeDeals" (registered: true | false)
//   node emulate-chain.mjs report   RPC MARKET MANIFEST ROLES FROM TO K
//        one JSON line for blocks FROM..TO (inclusive) and the state at TO:
//        gas (sum of the receipts' gasUsed, all senders) by contract function, shards
//        replaced (FileManifest ShardReplaced), epochs proven / missed, disputes slashed,
//        epoch commitments (EpochCommitted: how many, the deal epochs under them, the
//        safety draws), challenges opened / answered / faulted, epochs claimed, deals terminated, exits requested, and per file the healthy
//        shards (deal Active, no fault counted, provider neither gone nor a cheater)
//   node emulate-chain.mjs slashed  RPC MARKET ROLES TO    providers with a fault since
//        block 0 (EpochMissed with slashed > 0, DisputeSlashed, ChallengeFaulted,
//        DealTerminated), by role: JSON {"role": ["0x…", …]}
//
//   node emulate-chain.mjs timeline RPC MARKET MANIFEST ROLES FAILED TO   for each failed
//        provider (FAILED: a JSON file {"0xprovider": chain timestamp of its failure}),
//        its deals active then: hours of chain time from the failure to the deal's
//        first fault (a slashed EpochMissed, a DisputeSlashed or a ChallengeFaulted) and
//        to the ShardReplaced that moved it; by role
//        (JSON: shards, slashed, repaired, median and max hours)
//
// ROLES: a JSON file {"0xprovider (lower case)": "honest" | "restarted" | "cheater" |
// "gone" | "deleter" | "exiter"}; a provider not named there counts as honest.
// Exits non-zero with a message on stderr on any RPC error.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const require = createRequire(join(root, "package.json"));
const { createPublicClient, http, decodeEventLog, toFunctionSelector } = require("viem");
const abiOf = (name) => {
  const j = JSON.parse(readFileSync(join(root, "chain", "abi", name), "utf8"));
  return Array.isArray(j) ? j : j.abi;
};
const marketAbi = abiOf("DporMarket.json");
const manifestAbi = abiOf("FileManifest.json");
const tokenAbi = abiOf("TestToken.json");

const [cmd, rpc, market, ...rest] = process.argv.slice(2);
const client = createPublicClient({ transport: http(rpc, { batch: { batchSize: 200 }, retryCount: 3, timeout: 60000 }) });
const ACTIVE = 2;
const roles = (path) => {
  const r = JSON.parse(readFileSync(path, "utf8"));
  return (a) => r[a.toLowerCase()] || "honest";
};
const read = (functionName, args = []) => client.readContract({ address: market, abi: marketAbi, functionName, args });
const allDeals = async () => {
  const n = Number(await read("dealCount"));
  const ids = Array.from({ length: n }, (_, i) => BigInt(i + 1));
  const deals = await Promise.all(ids.map((id) => read("getDeal", [id])));
  return ids.map((id, i) => ({ id, ...deals[i] }));
};

async function pending(rolesPath, mode = "deal") {
  const role = roles(rolesPath);
  const [genesis, epochSeconds, block] = await Promise.all([read("genesis"), read("epochSeconds"), client.getBlock()]);
  const g = (block.timestamp - genesis) / epochSeconds;
  const due = (await allDeals()).filter((d) => {
    const r = role(d.provider);
    if (d.state !== ACTIVE || !(r === "honest" || r === "restarted" || r === "exiter")) return false;
    const e = g - d.startEpoch;
    return e >= 0n && e < BigInt(d.numEpochs);
  });
  const inForce = await Promise.all(due.map((d) => read("digestInForce", [d.id, g - d.startEpoch])));
  const withDigest = due.filter((_, i) => inForce[i][0] > 0n);
  if (mode === "commit") {
    // One commitment per provider per global epoch settles all its deals' epochs at g
    // (whether each entry is right is the watchers' check: a wrong or missing one is
    // challenged and, unanswered, faulted, which the report counts as a slashing).
    const providers = [...new Set(withDigest.map((d) => d.provider.toLowerCase()))];
    const got = await Promise.all(providers.map((p) => read("getCommitment", [p, g])));
    const left = providers.filter((_, i) => !got[i][1]);
    console.log(left.length);
    for (const p of left.slice(0, 5)) console.log(p);
    return;
  }
  if (mode !== "deal") throw new Error(`pending: MODE must be deal or commit (got ${mode})`);
  const status = await Promise.all(withDigest.map((d) => read("epochStatus", [d.id, g - d.startEpoch])));
  const left = withDigest.filter((_, i) => Number(status[i]) === 0);
  console.log(left.length);
  for (const d of left.slice(0, 5)) console.log(`${d.id} ${d.provider.toLowerCase()}`);
}

async function nodes(rolesPath) {
  const addrs = Object.keys(JSON.parse(readFileSync(rolesPath, "utf8")));
  const got = await Promise.all(addrs.map((a) => read("getProvider", [a])));
  addrs.forEach((a, i) => console.log(`${a} ${got[i].registered} ${got[i].activeDeals}`));
}

// Names of the functions a transaction may call, by selector.
const selectors = new Map();
for (const abi of [marketAbi, manifestAbi, tokenAbi]) {
  for (const item of abi) if (item.type === "function") selectors.set(toFunctionSelector(item), item.name);
}

async function logsOf(address, abi, from, to) {
  const logs = [];
  const step = 2000n;
  for (let a = from; a <= to; a += step) {
    const b = a + step - 1n < to ? a + step - 1n : to;
    logs.push(...(await client.getLogs({ address, fromBlock: a, toBlock: b })));
  }
  return logs.flatMap((l) => {
    try {
      return [{ ...decodeEventLog({ abi, data: l.data, topics: l.topics }), blockNumber: l.blockNumber }];
    } catch {
      return [];
    }
  });
}

async function report(manifest, rolesPath, fromS, toS, kS) {
  const role = roles(rolesPath);
  const from = BigInt(fromS), to = BigInt(toS);
  // Gas: every transaction of every block in the range (all senders: nodes, owners,
  // the auditor, the beacon relay, token mints).
  const gas = {};
  let txs = 0;
  const nums = [];
  for (let b = from; b <= to; b++) nums.push(b);
  for (let i = 0; i < nums.length; i += 100) {
    const chunk = nums.slice(i, i + 100);
    const blocks = await Promise.all(chunk.map((b) => client.getBlock({ blockNumber: b, includeTransactions: true })));
    const receipts = await Promise.all(
      blocks.map((bl) => (bl.transactions.length ? client.request({ method: "eth_getBlockReceipts", params: [`0x${bl.number.toString(16)}`] }) : [])),
    );
    blocks.forEach((bl, j) => {
      bl.transactions.forEach((tx, t) => {
        const r = receipts[j][t];
        const name = selectors.get((tx.input || "").slice(0, 10)) || (tx.to ? "other" : "create");
        gas[name] = (gas[name] || 0) + Number(BigInt(r.gasUsed));
        txs++;
      });
    });
  }
  const ev = [...(await logsOf(market, marketAbi, from, to)), ...(await logsOf(manifest, manifestAbi, from, to))];
  const count = (name) => ev.filter((e) => e.eventName === name).length;
  const deals = await allDeals();
  const byId = new Map(deals.map((d) => [d.id, d]));
  const healthy = (id) => {
    const d = byId.get(BigInt(id));
    if (!d || d.state !== ACTIVE || Number(d.failures) > 0) return false;
    const r = role(d.provider);
    return r !== "gone" && r !== "cheater";
  };
  const nFiles = Number(await client.readContract({ address: manifest, abi: manifestAbi, functionName: "fileCount" }));
  const files = await Promise.all(
    Array.from({ length: nFiles }, (_, i) => client.readContract({ address: manifest, abi: manifestAbi, functionName: "getFile", args: [BigInt(i + 1)] })),
  );
  const k = Number(kS);
  let whole = 0, decodable = 0, below = 0, shards = 0, unhealthy = 0;
  for (const f of files) {
    const h = f.shards.filter((s) => healthy(s.dealId)).length;
    shards += f.shards.length;
    unhealthy += f.shards.length - h;
    if (h === f.shards.length) whole++;
    if (h >= (Number(f.k) || k)) decodable++;
    else below++;
  }
  const replaced = ev.filter((e) => e.eventName === "ShardReplaced");
  const blockBytesOf = (id) => {
    const d = byId.get(BigInt(id));
    return d ? Number(d.numBlocks) * Number(d.blockSize) : 0;
  };
  console.log(JSON.stringify({
    blocks: Number(to - from + 1n), txs, gas_total: Object.values(gas).reduce((a, b) => a + b, 0), gas,
    shards_replaced: replaced.length,
    replaced_shard_bytes: replaced.reduce((a, e) => a + blockBytesOf(e.args.newDealId), 0),
    epochs_proven: count("EpochProven"),
    commitments: count("EpochCommitted"),
    epochs_committed: ev.filter((e) => e.eventName === "EpochCommitted").reduce((a, e) => a + Number(e.args.leafCount), 0),
    safety_draws: ev.filter((e) => e.eventName === "EpochCommitted" && e.args.safetyChallengeId > 0n).length,
    challenges_opened: count("ChallengeOpened"), challenges_answered: count("ChallengeAnswered"),
    epochs_claimed: ev.filter((e) => e.eventName === "EpochsClaimed").reduce((a, e) => a + Number(e.args.proven), 0), epochs_missed: count("EpochMissed"), epochs_excused: count("EpochExcused"),
    disputes_slashed: count("DisputeSlashed"), challenges_faulted: count("ChallengeFaulted"),
    deals_terminated: count("DealTerminated"), exits_requested: count("ExitRequested"), deals_opened: count("DealOpened"),
    files: nFiles, files_whole: whole, files_decodable: decodable, files_below_k: below, shards, shards_unhealthy: unhealthy,
  }));
}

async function slashed(rolesPath, toS) {
  const role = roles(rolesPath);
  const ev = await logsOf(market, marketAbi, 0n, BigInt(toS));
  const providerOf = new Map((await allDeals()).map((d) => [d.id, d.provider.toLowerCase()]));
  const hit = new Set();
  for (const e of ev) {
    const faulted =
      (e.eventName === "EpochMissed" && e.args.slashed > 0n) ||
      e.eventName === "DisputeSlashed" || e.eventName === "ChallengeFaulted" || e.eventName === "DealTerminated";
    if (faulted && providerOf.has(e.args.dealId)) hit.add(providerOf.get(e.args.dealId));
  }
  const out = {};
  for (const p of hit) (out[role(p)] ||= []).push(p);
  console.log(JSON.stringify(out));
}

async function timeline(manifest, rolesPath, failedPath, toS) {
  const role = roles(rolesPath);
  const failed = JSON.parse(readFileSync(failedPath, "utf8"));
  const to = BigInt(toS);
  const ev = [...(await logsOf(market, marketAbi, 0n, to)), ...(await logsOf(manifest, manifestAbi, 0n, to))];
  const blocks = [...new Set(ev.map((e) => e.blockNumber))];
  const ts = new Map();
  for (let i = 0; i < blocks.length; i += 100) {
    const got = await Promise.all(blocks.slice(i, i + 100).map((b) => client.getBlock({ blockNumber: b })));
    got.forEach((b) => ts.set(b.number, Number(b.timestamp)));
  }
  const firstMissed = new Map(), replacedAt = new Map();
  for (const e of ev) {
    const t = ts.get(e.blockNumber);
    if (e.eventName === "EpochMissed" && e.args.slashed > 0n && !firstMissed.has(e.args.dealId)) firstMissed.set(e.args.dealId, t);
    if ((e.eventName === "DisputeSlashed" || e.eventName === "ChallengeFaulted") && !firstMissed.has(e.args.dealId)) firstMissed.set(e.args.dealId, t);
    if (e.eventName === "ShardReplaced") replacedAt.set(BigInt(e.args.oldDealId), t);
  }
  const deals = await allDeals();
  const out = {};
  const q = (xs, p) => (xs.length ? xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] : null);
  for (const [addr, at] of Object.entries(failed)) {
    const r = role(addr);
    const o = (out[r] ||= { shards: 0, slashed: 0, repaired: 0, to_slash_h: [], to_repair_h: [] });
    for (const d of deals) {
      if (d.provider.toLowerCase() !== addr.toLowerCase() || Number(d.acceptedAt) === 0 || Number(d.acceptedAt) > at) continue;
      if (!ev.some((e) => e.eventName === "FileRecorded" && e.args.dealIds.includes(d.id)) && !ev.some((e) => e.eventName === "ShardReplaced" && BigInt(e.args.newDealId) === d.id)) continue;
      o.shards++;
      if (firstMissed.has(d.id)) { o.slashed++; o.to_slash_h.push((firstMissed.get(d.id) - at) / 3600); }
      if (replacedAt.has(d.id)) { o.repaired++; o.to_repair_h.push((replacedAt.get(d.id) - at) / 3600); }
    }
  }
  for (const o of Object.values(out)) {
    for (const k of ["to_slash_h", "to_repair_h"]) {
      const xs = o[k];
      o[k] = { median: q(xs, 0.5), max: xs.length ? Math.max(...xs) : null };
    }
  }
  console.log(JSON.stringify(out));
}

try {
  if (cmd === "timeline") await timeline(...rest);
  else if (cmd === "pending") await pending(rest[0], rest[1]);
  else if (cmd === "nodes") await nodes(rest[0]);
  else if (cmd === "report") await report(...rest);
  else if (cmd === "slashed") await slashed(...rest);
  else throw new Error(`unknown command ${cmd}`);
} catch (e) {
  console.error(`emulate-chain ${cmd}: ${e.shortMessage || e.message}`);
  process.exit(1);
}
