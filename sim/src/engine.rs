//! The discrete-event engine: providers fail, leave, cheat and join; owners detect it
//! at their `dpor watch` passes with `dpor_disperse::policy::needs_repair` and move
//! the shard with `dpor_disperse::policy::pick_providers`.
//!
//! **State.** Per file, the provider of each shard (`u32`, [`NONE`] while the shard is
//! being repaired) and how many of its shards have lost their data; per provider, the
//! shards it holds (file, slot) — files get events only when one of their providers
//! fails, through that index. Events in a binary heap ordered by (time, sequence).
//!
//! **What condemns a shard** (its provider's event, then the owner's decision):
//! - disk loss: the data is gone; the deal misses the proof of the epoch under way
//!   (one fault per epoch after), the owner sees the faults at its next pass;
//! - exit: the deal ends at once, the data goes with the provider;
//! - cheating: the provider drops a fraction f of each shard; each epoch's proof of a
//!   deal fails with probability 1 − (1 − f)^K, a fault, the deal is slashed;
//! - outage: the node is down; the owner's probes fail from its first pass in the
//!   outage, and the shard is moved if the outage outlasts `unreachable_epochs` or an
//!   epoch proof is missed past `max_faults` (the data is not lost: the file's loss
//!   count does not move).
//!
//! A file is lost when more than n − k of its shards have lost their data before
//! their repairs complete (repair time: a watch pass after the decision plus the
//! measured repair time of the file's size).

use crate::scenario::{Scenario, YEAR};
use dpor_disperse::policy::{self, Candidate, Reason, ShardObservation, Terms};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// No provider (a shard being repaired).
pub const NONE: u32 = u32::MAX;

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Outcome {
    /// Files lost.
    pub files_lost: u64,
    /// File-years at risk (each file counts until it is lost).
    pub file_years: f64,
    /// Shards repaired, by reason: deal ended, faulted, unreachable.
    pub repairs: [u64; 3],
    /// Of which, shards whose data was lost (disk, exit, cheater) rather than moved
    /// away from an unreachable node.
    pub repairs_of_lost_data: u64,
    /// Bytes moved by repairs (k shards fetched + one uploaded, wire overhead included).
    pub repair_bytes: f64,
    /// Mean live deals over the run.
    pub mean_deals: f64,
    /// Mean live providers over the run.
    pub mean_providers: f64,
    /// Gas of events over the run: repairs (new deal + `replaceShard`), faults
    /// (`markMissed`), slashes, deal renewals and claims.
    pub event_gas: f64,
    /// Cheaters' shards found and repaired: hours from the data drop to the slashing,
    /// and to the repaired shard, one pair per shard.
    pub cheat_delays_hours: Vec<(f32, f32)>,
    /// Providers that joined.
    pub joins: u64,
    /// Placements retried for lack of a qualifying provider in the owner's view.
    pub placement_retries: u64,
    /// Files that could not be placed at the start (fewer than n qualifying providers
    /// in 8 views): they hold no shard and are counted neither lost nor at risk.
    pub unplaced_files: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A provider's next failure (disk loss, exit or outage: drawn then).
    Fail(u32),
    /// A cheater drops data.
    Cheat(u32),
    /// A failure domain's outage.
    RegionOutage(u16),
    /// A failure domain's data loss.
    RegionLoss(u16),
    /// A provider joins.
    Join,
    /// A shard's repair completes: file, slot, its data was lost (1) or not (0).
    Repair(u32, u16, u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    DiskLoss,
    Exit,
    Cheat,
    Outage { end: u64 },
}

#[derive(Debug, Default)]
struct Prov {
    alive: bool,
    cheated: bool,
    slashed: bool,
    down_until: u64,
    price: u32,
    cap: u32,
    shards: Vec<u64>,
}

/// One run's state.
pub struct Sim {
    sc: Scenario,
    rng: ChaCha8Rng,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    now: u64,
    end: u64,
    provs: Vec<Prov>,
    region_members: Vec<Vec<u32>>,
    region_cdf: Vec<f64>,
    slots: Vec<u32>,
    missing: Vec<u8>,
    lost: Vec<bool>,
    lost_at: Vec<u64>,
    live_deals: u64,
    live_provs: u64,
    deal_area: f64,
    prov_area: f64,
    last_t: u64,
    cap: u32,
    out: Outcome,
    cands: Vec<Candidate<u32, u32>>,
}

fn entry(file: u32, slot: u16) -> u64 {
    (u64::from(file) << 16) | u64::from(slot)
}

fn split(e: u64) -> (u32, u16) {
    ((e >> 16) as u32, (e & 0xffff) as u16)
}

/// A per-file pseudo-random phase of its owner's watch passes (splitmix64).
fn phase(file: u32, interval: u64) -> u64 {
    let mut z = u64::from(file).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % interval.max(1)
}

impl Sim {
    /// Sets up the network: providers in their domains, every file placed by
    /// `pick_providers` over the owner's view of the registry.
    pub fn new(sc: Scenario) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(sc.seed);
        let regions = usize::from(sc.regions.max(1));
        let mut acc = 0.0;
        let mut region_cdf = Vec::with_capacity(regions);
        for r in 0..regions {
            acc += 1.0 / ((r + 1) as f64).sqrt();
            region_cdf.push(acc);
        }
        let share = f64::from(sc.files) * f64::from(sc.n) / f64::from(sc.providers.max(1));
        let cap = (share * sc.capacity_factor).ceil().max(1.0) as u32;
        let end = (sc.years * YEAR) as u64;
        let files = sc.files as usize;
        let n = usize::from(sc.n);
        let mut sim = Sim {
            rng: ChaCha8Rng::seed_from_u64(rng.gen()),
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0,
            end,
            provs: Vec::with_capacity(sc.providers as usize * 2),
            region_members: vec![Vec::new(); regions],
            region_cdf,
            slots: vec![NONE; files * n],
            missing: vec![0; files],
            lost: vec![false; files],
            lost_at: vec![0; files],
            live_deals: 0,
            live_provs: 0,
            deal_area: 0.0,
            prov_area: 0.0,
            last_t: 0,
            cap,
            out: Outcome::default(),
            cands: Vec::new(),
            sc,
        };
        for _ in 0..sim.sc.providers {
            sim.add_provider();
        }
        for r in 0..regions as u16 {
            sim.schedule_region(r);
        }
        sim.schedule_join();
        for f in 0..sim.sc.files {
            let chosen = sim.pick(f, usize::from(sim.sc.n));
            if chosen.is_empty() {
                sim.out.unplaced_files += 1;
                sim.lost[f as usize] = true;
                continue;
            }
            for (slot, p) in chosen.into_iter().enumerate() {
                sim.assign(f, slot as u16, p, false);
            }
        }
        sim
    }

    fn push(&mut self, t: u64, ev: Ev) {
        if t <= self.end {
            self.seq += 1;
            self.heap.push(Reverse((t, self.seq, ev)));
        }
    }

    fn exp_secs(&mut self, per_year: f64) -> u64 {
        if per_year <= 0.0 {
            return u64::MAX;
        }
        let u: f64 = self.rng.gen_range(f64::MIN_POSITIVE..1.0);
        let s = -u.ln() / per_year * YEAR;
        if s >= 1e18 {
            u64::MAX
        } else {
            s as u64
        }
    }

    fn after(&mut self, per_year: f64) -> u64 {
        self.now.saturating_add(self.exp_secs(per_year))
    }

    fn add_provider(&mut self) {
        let id = self.provs.len() as u32;
        let x = self.rng.gen_range(0.0..*self.region_cdf.last().unwrap_or(&1.0));
        let region = self.region_cdf.partition_point(|c| *c < x).min(self.region_cdf.len() - 1) as u16;
        let cheater = self.rng.gen_bool(self.sc.cheater_fraction.clamp(0.0, 1.0));
        let price = self.rng.gen_range(1..=100);
        self.provs.push(Prov { alive: true, price, cap: self.cap, ..Prov::default() });
        self.region_members[usize::from(region)].push(id);
        self.live_provs += 1;
        let afr_rate = -(1.0 - self.sc.disk_afr.min(0.999_999)).ln();
        let t = self.after(afr_rate + self.sc.exit_rate + self.sc.outage_rate);
        self.push(t, Ev::Fail(id));
        if cheater {
            let t = self.after(1.0 / self.sc.cheat_after_years.max(1e-9));
            self.push(t, Ev::Cheat(id));
        }
    }

    fn schedule_region(&mut self, r: u16) {
        let t = self.after(self.sc.region_outage_rate);
        self.push(t, Ev::RegionOutage(r));
        let t = self.after(self.sc.region_loss_rate);
        self.push(t, Ev::RegionLoss(r));
    }

    fn schedule_join(&mut self) {
        let t = self.after(self.sc.exit_rate * f64::from(self.sc.providers));
        self.push(t, Ev::Join);
    }

    /// `pick_providers` over a random view of the registry for `need` shards of file `f`
    /// (its current holders excluded); retries with fresh views, empty if none works.
    fn pick(&mut self, f: u32, need: usize) -> Vec<u32> {
        let n = usize::from(self.sc.n);
        let exclude: Vec<u32> = self.slots[f as usize * n..(f as usize + 1) * n].iter().copied().filter(|p| *p != NONE).collect();
        let terms = Terms { blocks: self.sc.shard_blocks(), min_stake: 1, max_price: None, min_collateral: None };
        let view = self.sc.view_factor * need + 8;
        for _ in 0..8 {
            let mut cands = std::mem::take(&mut self.cands);
            cands.clear();
            for _ in 0..view {
                let p = self.rng.gen_range(0..self.provs.len()) as u32;
                let pr = &self.provs[p as usize];
                // A node that does not answer is skipped by `dpor repair` after the pick
                // (it dials first): the same as leaving it out of the view.
                if pr.down_until > self.now || cands.iter().any(|c| c.id == p) {
                    continue;
                }
                cands.push(Candidate {
                    id: p,
                    peer: p,
                    registered: pr.alive,
                    stake: if pr.slashed { 0 } else { 1 },
                    free_blocks: u64::from(pr.cap.saturating_sub(pr.shards.len() as u32)) * terms.blocks,
                    price: u128::from(pr.price),
                    collateral: 1,
                });
            }
            let got = policy::pick_providers(&cands, need, &terms, None, &exclude, &[]);
            let ids = got.map(|ix| ix.into_iter().map(|i| cands[i].id).collect::<Vec<_>>());
            self.cands = cands;
            if let Ok(ids) = ids {
                return ids;
            }
            self.out.placement_retries += 1;
        }
        Vec::new()
    }

    fn assign(&mut self, f: u32, slot: u16, p: u32, counted: bool) {
        let n = usize::from(self.sc.n);
        self.slots[f as usize * n + usize::from(slot)] = p;
        self.provs[p as usize].shards.push(entry(f, slot));
        self.live_deals += 1;
        if counted {
            self.missing[f as usize] = self.missing[f as usize].saturating_sub(1);
        }
        if self.provs[p as usize].cheated {
            // A cheater that already drops data drops this shard's as well.
            self.provs[p as usize].shards.pop();
            self.condemn(f, slot, Cause::Cheat);
        }
    }

    /// The next watch pass of file `f`'s owner at or after `t`.
    fn pass(&self, f: u32, t: u64) -> u64 {
        let i = self.sc.watch_interval.max(1);
        let ph = phase(f, i);
        t + (ph + i - t % i) % i
    }

    fn epoch_end(&self, t: u64) -> u64 {
        let e = self.sc.epoch_seconds.max(1);
        (t / e + 1) * e
    }

    /// When the owner of file `f` decides (`needs_repair`) to repair a shard after
    /// `cause` at the current time, and why; `None` if it never does (an outage over
    /// before any rule fires), with the faults counted by then.
    fn decide(&mut self, f: u32, cause: Cause) -> Option<(u64, Reason, u16)> {
        let t = self.now;
        let ep = self.sc.epoch_seconds.max(1);
        let rules = self.sc.rules;
        let healthy = ShardObservation { asked: false, deal_active: true, faults: 0, unreachable_since: None };
        let first_fault = self.epoch_end(t);
        let q = self.sc.detection_per_epoch();
        match cause {
            Cause::Exit => {
                let now = self.pass(f, t);
                let obs = ShardObservation { deal_active: false, ..healthy };
                policy::needs_repair(&obs, &rules, now, ep).map(|r| (now, r, 0))
            }
            Cause::DiskLoss | Cause::Cheat => {
                let mut tf = first_fault;
                for j in 1..=u16::MAX {
                    if cause == Cause::Cheat {
                        // Epochs until a proof fails: geometric with p = 1 − (1 − f)^K.
                        let u: f64 = self.rng.gen_range(f64::MIN_POSITIVE..1.0);
                        let g = if q >= 1.0 { 1.0 } else { (u.ln() / (1.0 - q).ln()).ceil().max(1.0) };
                        tf = tf.saturating_add(((g - 1.0) * ep as f64) as u64);
                    }
                    let now = self.pass(f, tf);
                    let obs = ShardObservation { faults: j, ..healthy };
                    if let Some(r) = policy::needs_repair(&obs, &rules, now, ep) {
                        return Some((now, r, j));
                    }
                    tf += ep;
                }
                None
            }
            Cause::Outage { end } => {
                let since = self.pass(f, t);
                if since >= end {
                    return None;
                }
                // Check times: each pass at which a rule may first fire (the grace
                // period over; each fault counted, one per epoch wholly down).
                let grace = rules.unreachable_epochs.saturating_mul(ep);
                let mut checks = vec![(self.pass(f, since.saturating_add(grace)), 0u16)];
                let mut a = first_fault;
                let mut j = 0u16;
                while a + ep <= end && j <= rules.max_faults {
                    j += 1;
                    checks.push((self.pass(f, a + ep), j));
                    a += ep;
                }
                checks.sort_unstable();
                let mut faults = 0;
                for (now, jf) in checks {
                    if now >= end {
                        break;
                    }
                    faults = faults.max(jf);
                    let obs = ShardObservation { faults, unreachable_since: Some(since), ..healthy };
                    if let Some(r) = policy::needs_repair(&obs, &rules, now, ep) {
                        return Some((now, r, faults));
                    }
                }
                None
            }
        }
    }

    /// The shard (`f`, `slot`) leaves its provider (the caller took it off the
    /// provider's list) for `cause`: counted as lost data unless an outage; the repair
    /// scheduled at the owner's decision plus the repair time. Returns false (and
    /// leaves the shard in place) if the owner never decides to repair it.
    fn condemn(&mut self, f: u32, slot: u16, cause: Cause) -> bool {
        let Some((at, reason, faults)) = self.decide(f, cause) else {
            return false;
        };
        let n = usize::from(self.sc.n);
        let k = self.sc.k;
        let counted = !matches!(cause, Cause::Outage { .. });
        let fi = f as usize;
        self.slots[fi * n + usize::from(slot)] = NONE;
        self.live_deals -= 1;
        let c = self.sc.costs;
        self.out.event_gas += f64::from(faults) * c.mark_missed_gas as f64;
        if cause == Cause::Cheat {
            self.out.event_gas += c.slash_gas as f64;
        }
        let rsecs = c.repair_seconds(self.sc.file_bytes) as u64;
        let done = at.saturating_add(rsecs);
        if cause == Cause::Cheat && done <= self.end {
            let h = |x: u64| (x.saturating_sub(self.now)) as f32 / 3600.0;
            self.out.cheat_delays_hours.push((h(at), h(done)));
        }
        match reason {
            Reason::DealEnded | Reason::Asked => self.out.repairs[0] += 1,
            Reason::Faulted(_) => self.out.repairs[1] += 1,
            Reason::Unreachable => self.out.repairs[2] += 1,
        }
        if counted {
            self.missing[fi] = self.missing[fi].saturating_add(1);
            if !policy::can_rebuild(usize::from(self.missing[fi]), k, self.sc.n) && !self.lost[fi] {
                self.lost[fi] = true;
                self.lost_at[fi] = self.now;
                self.out.files_lost += 1;
                let remaining = self.slots[fi * n..(fi + 1) * n].iter().filter(|p| **p != NONE).count() as u64;
                self.live_deals -= remaining;
                return true;
            }
        }
        self.push(done, Ev::Repair(f, slot, u8::from(counted)));
        true
    }

    /// Every shard of provider `p` leaves it for `cause` (outages: only those the
    /// owner decides to move).
    fn fail_all(&mut self, p: u32, cause: Cause) {
        let list = std::mem::take(&mut self.provs[p as usize].shards);
        let mut kept = Vec::new();
        for e in list {
            let (f, slot) = split(e);
            if self.lost[f as usize] {
                continue;
            }
            if !self.condemn(f, slot, cause) {
                kept.push(e);
            }
        }
        self.provs[p as usize].shards = kept;
    }

    fn outage(&mut self, p: u32, hours: f64) {
        let pr = &self.provs[p as usize];
        if !pr.alive || pr.down_until > self.now {
            return;
        }
        let end = self.now.saturating_add((hours * 3600.0) as u64);
        self.provs[p as usize].down_until = end;
        self.fail_all(p, Cause::Outage { end });
    }

    fn advance(&mut self, t: u64) {
        let dt = t.saturating_sub(self.last_t) as f64;
        self.deal_area += self.live_deals as f64 * dt;
        self.prov_area += self.live_provs as f64 * dt;
        self.last_t = t;
        self.now = t;
    }

    /// Runs to the end and returns what it measured.
    pub fn run(mut self) -> Outcome {
        while let Some(Reverse((t, _, ev))) = self.heap.pop() {
            self.advance(t);
            match ev {
                Ev::Fail(p) => {
                    if !self.provs[p as usize].alive {
                        continue;
                    }
                    let afr_rate = -(1.0 - self.sc.disk_afr.min(0.999_999)).ln();
                    let total = afr_rate + self.sc.exit_rate + self.sc.outage_rate;
                    let x = self.rng.gen_range(0.0..total);
                    if x < afr_rate {
                        self.fail_all(p, Cause::DiskLoss);
                    } else if x < afr_rate + self.sc.exit_rate {
                        self.fail_all(p, Cause::Exit);
                        self.provs[p as usize].alive = false;
                        self.live_provs -= 1;
                        continue;
                    } else {
                        let h = self.exp_secs(YEAR / 3600.0 / self.sc.outage_mean_hours.max(1e-9)) as f64 / 3600.0;
                        self.outage(p, h);
                    }
                    let t = self.after(total);
                    self.push(t, Ev::Fail(p));
                }
                Ev::Cheat(p) => {
                    if self.provs[p as usize].alive {
                        self.provs[p as usize].cheated = true;
                        self.fail_all(p, Cause::Cheat);
                        // Slashed at its first fault: no owner picks it again (stake 0).
                        self.provs[p as usize].slashed = true;
                    }
                }
                Ev::RegionOutage(r) => {
                    let h = self.exp_secs(YEAR / 3600.0 / self.sc.region_outage_mean_hours.max(1e-9)) as f64 / 3600.0;
                    let members = std::mem::take(&mut self.region_members[usize::from(r)]);
                    for &p in &members {
                        self.outage(p, h);
                    }
                    self.region_members[usize::from(r)] = members;
                    let t = self.after(self.sc.region_outage_rate);
                    self.push(t, Ev::RegionOutage(r));
                }
                Ev::RegionLoss(r) => {
                    let members = std::mem::take(&mut self.region_members[usize::from(r)]);
                    for &p in &members {
                        if self.provs[p as usize].alive {
                            self.fail_all(p, Cause::DiskLoss);
                        }
                    }
                    self.region_members[usize::from(r)] = members;
                    let t = self.after(self.sc.region_loss_rate);
                    self.push(t, Ev::RegionLoss(r));
                }
                Ev::Join => {
                    self.add_provider();
                    self.out.joins += 1;
                    self.schedule_join();
                }
                Ev::Repair(f, slot, counted) => {
                    if self.lost[f as usize] {
                        continue;
                    }
                    let chosen = self.pick(f, 1);
                    let Some(&p) = chosen.first() else {
                        self.push(t + 3600, Ev::Repair(f, slot, counted));
                        continue;
                    };
                    let c = self.sc.costs;
                    let shard = self.sc.file_bytes as f64 / f64::from(self.sc.k);
                    self.out.repair_bytes += (self.sc.file_bytes as f64 + shard) * c.wire_bytes_per_upload_byte;
                    self.out.event_gas += (c.new_deal_gas() + c.replace_shard_gas) as f64;
                    if counted == 1 {
                        self.out.repairs_of_lost_data += 1;
                    }
                    self.assign(f, slot, p, counted == 1);
                }
            }
        }
        self.advance(self.end);
        let secs = self.end.max(1) as f64;
        self.out.mean_deals = self.deal_area / secs;
        self.out.mean_providers = self.prov_area / secs;
        // Renewals: every live deal is renewed at the end of its term (a new deal with
        // the same provider: openDeal + acceptDeal + first postDigest) and claims its pay.
        let term = (self.sc.deal_epochs.max(1) * self.sc.epoch_seconds.max(1)) as f64;
        let c = self.sc.costs;
        self.out.event_gas += self.deal_area / term * (c.new_deal_gas() + c.claim_epochs_gas) as f64;
        // Unplaced files are flagged lost at time 0: no file-years, no loss counted.
        let mut fy = 0.0;
        for (i, l) in self.lost.iter().enumerate() {
            fy += if *l { self.lost_at[i] as f64 } else { self.end as f64 } / YEAR;
        }
        self.out.file_years = fy;
        self.out
    }
}

/// Builds and runs a scenario.
pub fn simulate(sc: &Scenario) -> Outcome {
    Sim::new(sc.clone()).run()
}
