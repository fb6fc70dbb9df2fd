//! OpenMPI's rendezvous exchanges between partners, the sendrecv of every pairwise algorithm
//! (recursive doubling, rabenseifner, recursive halving, butterfly, bruck's last step, neighbor
//! exchange, the split binary tree's halves): their two modes as the testbed runs them (both
//! ways at once, or the way back after the first way's head), how often each ran, pair by pair
//! and by what the partners did before ([`Partners`], [`Histories`]), a step of pairs run
//! as slow as its slowest ([`StepPairs`]), a call's steps slow from the first that ran
//! slow to its end ([`CallExchanges`]), and which partner's data goes first in a slow
//! exchange: the one that posts first ([`Lead`]), a coin between partners that stand alike,
//! the call played every way its coins fall, each as likely ([`oriented_ways`]); and a call's
//! exchanges played pair by pair, each once its two partners are done with their last
//! ([`Ready`], [`exchanges_pair_by_pair`]). The messages themselves are the parent module's.

use std::cell::{Cell, RefCell};

use super::{is_eager, join, message, reversed, transfer, ACK_BYTES, REQUEST_BYTES};
use crate::collective::{Endpoint, OpId, Phase, Schedule};

/// How pairwise rendezvous exchanges ran on the testbed (`suite.py mpi_p2p --ranks 4`, all four
/// ranks exchanging in pairs at once, TCP cubic, 10 repetitions per size and launch, each launch
/// a fresh mpirun: `data/runs/calibration/testbed_mpi_p2p_4ranks.json` and `..._launch2` to
/// `..._launch10.json`, 128 KiB to 16 MiB). A repetition runs in one of two modes, and a launch
/// tends to keep one (all 10 slow in some launches, none in others): both directions at once
/// (1.0x a one-way Send), or the way back waiting until the first way has all but a tail
/// left, whatever the size (1.35x at 128 KiB, 1.67x at 256 KiB, 1.93x at 1 MiB, 2.0x from
/// 4 MiB). [`SLOW_EXCHANGES`] of [`EXCHANGES`] ran the slow way (a repetition counts as slow
/// above the midpoint of the two modes); [`SLOW_EXCHANGE_TAIL_BYTES`] is the median tail of
/// the 144 slow ones up to 4 MiB (beyond, a tail is under the timer's resolution of a 0.7 s
/// exchange). What picks the mode is how the ranks enter (with the odd ranks 0.5 ms late, 10 of
/// 10 crossed at once), which no model here knows: dtsim plays the median call (`Exchanges`,
/// `CallExchanges`) from these shares, or their expected time where asked. A repetition
/// is as slow as the slower of its [`PAIRS_PER_REPETITION`] pairs, so one pair runs slow with
/// the probability p that makes two independent pairs slow that often (0.341), and a step of k
/// pairs is slow with 1 - (1 - p)^k (`slow_share`). Checked on eight ranks (four pairs,
/// `testbed_mpi_p2p_8ranks_launch1.json` to `..._launch5.json`, 2026-11-30): 120 of 150
/// repetitions slow, where the rule says 0.81 of them; on sixteen (eight pairs,
/// `testbed_mpi_p2p_16ranks_launch1.json` to `..._launch3.json`), 90 of 90, where it says 0.96.
pub const SLOW_EXCHANGES: u32 = 181;
/// All the four-rank exchange repetitions counted in [`SLOW_EXCHANGES`].
pub const EXCHANGES: u32 = 320;
/// Pairs exchanging at once in each repetition counted in [`SLOW_EXCHANGES`] (ranks 0-1, 2-3).
pub const PAIRS_PER_REPETITION: u32 = 2;
/// What the first way of a slow exchange still had to deliver when the way back started.
pub const SLOW_EXCHANGE_TAIL_BYTES: u64 = 82_500;

/// How exchanges ran whose partners had just waited on the call's own earlier messages: the
/// second steps of the five captured recursive-doubling all_gathers of 4 MiB on the star
/// (`testbed_star4_200mbit.capture_mpi_rd_4m.json`, `..._launch2` to `..._launch5.json`,
/// 2026-11-28, counted by `testbed/workloads/capture_exchanges.py`): [`POLLING_SLOW_EXCHANGES`] of
/// [`POLLING_EXCHANGES`] ran the slow way in every launch, where their first steps (partners
/// from the harness's barrier) ran it 41 of 107 times. In a slow exchange the late partner
/// answers the early one's request before it writes its own, so the early one's answer to it
/// leaves behind its data; it does so when it read that request while polling (waiting on the
/// network), which a rank waiting on the call's previous step does. Where the partners reduced
/// what they received before the step, the capture of ten recursive-halving reduce_scatters of
/// 4 MiB (`testbed_star4_200mbit.capture_mpi_rh_4m.json`, 2026-11-29) ran the second steps
/// the slow way 9 of 22 times: those are played at [`SLOW_EXCHANGES`]' share. These are counted
/// pair by pair: one pair's share. The captured second steps had at least one of their two
/// pairs slow 52 times in 52, where `slow_share`'s rule says 0.99.
pub const POLLING_SLOW_EXCHANGES: u32 = 95;
/// All the exchanges counted in [`POLLING_SLOW_EXCHANGES`].
pub const POLLING_EXCHANGES: u32 = 106;

/// How a call's steps follow one another, counted in the same captures call by call (a step of
/// two pairs, then one of other pairs; slow where any pair was: `capture_exchanges.py
/// --chain`): after a first step that ran the slow way, the second ran it too in
/// [`SLOW_STEPS_AFTER_SLOW`] of [`STEPS_AFTER_SLOW`] calls (recursive doubling's all-reduces
/// 12 of 12, its all_gathers 38 of 38, recursive halving's reduce_scatters 3 of 3). A slow
/// exchange ends its partners apart, the way back's sender free first (`Lead`), and
/// partners posting apart run slow (13 of 13 at 5 ms or more). After a fast first step the
/// second ran slow 8 of 37 times in the all-reduces and 2 of 7 in the reduce_scatters, which
/// reduce between steps, and 13 of 13 in the all_gathers, which do not: dtsim plays those at
/// the shares above (`Partners`). Not the capture's doing: four ranks' recursive-doubling
/// all-reduce written out with every rank's clock per step and no capture (`suite.py mpi_p2p
/// --p2p-modes rd_steps`, `testbed_mpi_rd_steps_4ranks_launch{1..20}.json`, 2026-12-03) ran its
/// second step slow after a slow first 158 times in 158 (`exchange_modes.py --steps`).
pub const SLOW_STEPS_AFTER_SLOW: u32 = 53;
/// All the calls counted in [`SLOW_STEPS_AFTER_SLOW`].
pub const STEPS_AFTER_SLOW: u32 = 53;

/// What the partners of an exchange did just before it, which decides how often its way back
/// waits ([`head_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Partners {
    /// They entered the call, or reduced what they had received: [`SLOW_EXCHANGES`]' share.
    Entering,
    /// They waited on the call's own earlier messages: [`POLLING_SLOW_EXCHANGES`]' share.
    Polling,
}

impl Partners {
    /// The partners of the `step`-th of exchanges that follow one another with no reduction
    /// between: entering at the first, polling after.
    pub(super) fn at_step(step: u32) -> Partners {
        if step == 0 {
            Partners::Entering
        } else {
            Partners::Polling
        }
    }

    /// How often one pair's exchange runs the slow way: polling partners' share was counted
    /// pair by pair; entering partners' was counted over repetitions of
    /// [`PAIRS_PER_REPETITION`] pairs, each as slow as its slower pair.
    fn slow_share_per_pair(self) -> f64 {
        match self {
            Partners::Entering => {
                let step = f64::from(SLOW_EXCHANGES) / f64::from(EXCHANGES);
                1.0 - (1.0 - step).powf(1.0 / f64::from(PAIRS_PER_REPETITION))
            }
            Partners::Polling => f64::from(POLLING_SLOW_EXCHANGES) / f64::from(POLLING_EXCHANGES),
        }
    }
}

/// The pairs exchanging at once in one step, by what their partners did before it
/// ([`Partners`]): the step runs as slow as its slowest pair ([`slow_share`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StepPairs {
    entering: u32,
    polling: u32,
}

impl StepPairs {
    /// `pairs` pairs, all of whose partners did `partners` before.
    pub(super) fn all(partners: Partners, pairs: u32) -> StepPairs {
        match partners {
            Partners::Entering => StepPairs {
                entering: pairs,
                polling: 0,
            },
            Partners::Polling => StepPairs {
                entering: 0,
                polling: pairs,
            },
        }
    }
}

/// How often a step runs the slow way: as slow as its slowest pair, each pair slow on its own
/// ([`Partners::slow_share_per_pair`]).
pub(super) fn slow_share(step: StepPairs) -> f64 {
    if step.entering + step.polling == 0 {
        return 0.0;
    }
    let fast = |p: Partners, k: u32| (1.0 - p.slow_share_per_pair()).powi(k as i32);
    1.0 - fast(Partners::Entering, step.entering) * fast(Partners::Polling, step.polling)
}

/// What each rank did before a step of a call whose ranks do not all do the same (the ranks
/// a non-power-of-two algorithm folds in, and those it does not), as a signature: partners
/// with equal signatures come to an exchange together, as `Partners` says of the step; partners
/// whose signatures differ come apart, the earlier one's request waiting while the later one
/// still waits on its own earlier messages ([`Partners::Polling`], as the captures show for
/// partners posting milliseconds apart). After an exchange both partners share a signature.
#[derive(Debug, Clone)]
pub(super) struct Histories(Vec<u64>);

impl Histories {
    /// `n` ranks entering together, those in `apart` (the fold's) having done something first.
    pub(super) fn new(n: u32, apart: impl IntoIterator<Item = Endpoint>) -> Histories {
        let mut h = vec![0u64; n as usize];
        for r in apart {
            h[r as usize] = 1;
        }
        Histories(h)
    }

    /// The step in which `pairs` exchange, partners alike doing `alike` before: its mix of
    /// pairs; the partners' signatures then become one.
    pub(super) fn step(&mut self, pairs: &[(Endpoint, Endpoint)], alike: Partners) -> StepPairs {
        let mut mix = StepPairs::all(alike, 0);
        for &(a, b) in pairs {
            let (ha, hb) = (self.0[a as usize], self.0[b as usize]);
            if ha == hb {
                mix = StepPairs {
                    entering: mix.entering + u32::from(alike == Partners::Entering),
                    polling: mix.polling + u32::from(alike == Partners::Polling),
                };
            } else {
                mix.polling += 1;
            }
            // Equal inputs give equal outputs, so pairs that came alike stay alike.
            let joined = splitmix(ha.min(hb) ^ splitmix(ha.max(hb)).rotate_left(17));
            self.0[a as usize] = joined;
            self.0[b as usize] = joined;
        }
        mix
    }
}

/// A 64-bit mix (splitmix64's finalizer): signatures that differ stay apart.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// How OpenMPI's rendezvous exchanges between partners (four or more ranks) run: the
/// testbed saw both directions at once in some launches and the way back waiting for the first
/// way in others ([`SLOW_EXCHANGES`]). `collective.exchanges` picks one, so a study can bound
/// what it cannot predict; with two ranks the way back always waits for all but the tail.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Exchanges {
    /// The median call (`CallExchanges`): both ways at once until the first step by which
    /// the call has run slow at least half the time, each step at its measured share while
    /// those before it ran fast, and the slow way from that step to the call's end
    /// ([`SLOW_STEPS_AFTER_SLOW`]). Since 2026-11-30; the default.
    #[default]
    Median,
    /// Every step at its measured share of slow exchanges, as an expected head (`head_bytes`),
    /// whatever the steps before it did: the default until 2026-11-30.
    Expected,
    /// Both directions at once.
    BothWays,
    /// The way back once the first way has all but [`SLOW_EXCHANGE_TAIL_BYTES`] delivered.
    OneWayFirst,
}

impl Exchanges {
    pub const NAMES: [(&'static str, Exchanges); 4] = [
        ("median", Exchanges::Median),
        ("expected", Exchanges::Expected),
        ("both_ways", Exchanges::BothWays),
        ("one_way_first", Exchanges::OneWayFirst),
    ];
    pub fn parse(s: &str) -> Option<Exchanges> {
        let s = s.trim().to_ascii_lowercase();
        Exchanges::NAMES
            .iter()
            .find(|(name, _)| *name == s)
            .map(|&(_, x)| x)
    }
    pub fn as_str(self) -> &'static str {
        Exchanges::NAMES
            .iter()
            .find(|(_, x)| *x == self)
            .map_or("median", |(name, _)| name)
    }
}

/// The exchanges of one call as its plan lays them out, step after step: the scenario's mode
/// and, in the median call ([`Exchanges::Median`]), how far the call has come. A call's steps
/// are slow from the first that runs slow to its end ([`SLOW_STEPS_AFTER_SLOW`]), so its time
/// falls as that first slow step comes later; the median call is the one whose first slow step
/// is the median's: the first step by which `1 - Π (1 - share)` over the steps so far reaches
/// one half (each step's share by its pairs, [`slow_share`]). Exchanges the slow mode cannot
/// change (eager, or within its tail) are not steps of it.
#[derive(Debug)]
pub(super) struct CallExchanges {
    x: Exchanges,
    chain: Cell<Chain>,
    /// Which way the call's slow exchanges go ([`Lead`], [`Coins`]).
    leads: RefCell<Vec<Lead>>,
    coins: Coins,
    drawn: Cell<u32>,
}

/// Where a rank stands when it posts its next exchange, as the 2:1 leaves' capture shows it
/// (`docs/testbed.md`, "OpenMPI's exchanges across the 2:1 uplinks run apart in time"): in a
/// slow exchange the way back's sender is done first, its Send returning while its data still
/// drains from its socket, and the first way's sender last, once that data has arrived;
/// partners that exchanged both ways at once (or eagerly) end together. In a slow exchange the
/// first way goes from the partner that posts first; between partners that stand alike a coin
/// decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Lead {
    Early,
    Even,
    Late,
}

/// The coins that decide which partner of a slow exchange posts first where both stand
/// alike: one per pair of every slow step, in the order the plan lays them out. `Bits(w)`:
/// coin i is bit i of way w (every way of a call with few coins); `Hashed(w)`: drawn from w
/// (a sample of the ways of a call with many).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Coins {
    Bits(u64),
    Hashed(u64),
}

impl Coins {
    fn coin(self, i: u32) -> bool {
        match self {
            Coins::Bits(w) => i < 64 && (w >> i) & 1 == 1,
            Coins::Hashed(w) => {
                splitmix(w.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ u64::from(i)) & 1 == 1
            }
        }
    }
}

/// Ways a call is played in, at most, where coins decide its slow exchanges (`oriented_ways`).
pub const ORIENTATION_WAYS: u64 = 16;
/// Communicators larger than this play one way (every tie to the lower rank first): each way
/// is a whole play of the call.
pub const ORIENTED_RANKS_MAX: u32 = 64;

/// A call's schedule (`build` given its exchanges in mode `x`) once per way its slow exchanges'
/// coins may fall ([`Coins`]), each as likely: every way where the coins are at most
/// log2 [`ORIENTATION_WAYS`], else that many drawn. The first, and the others.
pub(super) fn oriented_ways(
    x: Exchanges,
    ranks: u32,
    build: impl Fn(&CallExchanges) -> Schedule,
) -> (Schedule, Vec<Schedule>) {
    let first = CallExchanges::with_coins(x, Coins::Bits(0));
    let schedule = build(&first);
    let coins = first.drawn.get();
    if coins == 0 || ranks > ORIENTED_RANKS_MAX {
        return (schedule, Vec::new());
    }
    if 1u64 << coins.min(63) <= ORIENTATION_WAYS {
        let others = (1..1u64 << coins)
            .map(|w| build(&CallExchanges::with_coins(x, Coins::Bits(w))))
            .collect();
        return (schedule, others);
    }
    let mut all: Vec<Schedule> = (0..ORIENTATION_WAYS)
        .map(|w| build(&CallExchanges::with_coins(x, Coins::Hashed(w))))
        .collect();
    let schedule = all.remove(0);
    (schedule, all)
}

/// What `oriented_ways`' alternatives differ in, for reports.
pub const ORIENTATION: &str = "which partner of each slow exchange posts first";

/// How far a call has come: the step last played, the chance that every step so far ran fast,
/// and whether the median call runs slow from here on.
#[derive(Debug, Clone, Copy)]
struct Chain {
    step: Option<(Phase, u32)>,
    all_fast: f64,
    slow: bool,
}

impl CallExchanges {
    #[cfg(test)]
    pub(super) fn new(x: Exchanges) -> CallExchanges {
        CallExchanges::with_coins(x, Coins::Bits(0))
    }

    pub(super) fn with_coins(x: Exchanges, coins: Coins) -> CallExchanges {
        CallExchanges {
            x,
            chain: Cell::new(Chain {
                step: None,
                all_fast: 1.0,
                slow: false,
            }),
            leads: RefCell::new(Vec::new()),
            coins,
            drawn: Cell::new(0),
        }
    }

    /// `pairs` of a slow exchange with each pair's first way's sender first: the partner
    /// that posts first ([`Lead`]), a coin where they stand alike; each such pair's ranks then
    /// stand apart, the way back's sender early.
    fn oriented(&self, pairs: &[(Endpoint, Endpoint)]) -> Vec<(Endpoint, Endpoint)> {
        let mut leads = self.leads.borrow_mut();
        pairs
            .iter()
            .map(|&(a, b)| {
                let need = a.max(b) as usize + 1;
                if leads.len() < need {
                    leads.resize(need, Lead::Even);
                }
                let i = self.drawn.get();
                self.drawn.set(i + 1);
                let (la, lb) = (leads[a as usize], leads[b as usize]);
                let b_first = lb < la || (la == lb && self.coins.coin(i));
                let (first, second) = if b_first { (b, a) } else { (a, b) };
                leads[first as usize] = Lead::Late;
                leads[second as usize] = Lead::Early;
                (first, second)
            })
            .collect()
    }

    /// Partners that exchanged both ways at once end together.
    fn even(&self, pairs: &[(Endpoint, Endpoint)]) {
        let mut leads = self.leads.borrow_mut();
        for &(a, b) in pairs {
            for r in [a, b] {
                if let Some(l) = leads.get_mut(r as usize) {
                    *l = Lead::Even;
                }
            }
        }
    }

    /// [`head_bytes`] of an exchange of step `at` (its phase and step number: the exchanges
    /// of one step, split in several, share it), whose pairs are `step`.
    fn head_bytes(&self, ranks: u32, bytes: u64, step: StepPairs, at: (Phase, u32)) -> u64 {
        let x = match self.x {
            Exchanges::Median if ranks > 2 && bytes > SLOW_EXCHANGE_TAIL_BYTES => {
                let mut chain = self.chain.get();
                if chain.step != Some(at) {
                    chain.step = Some(at);
                    chain.all_fast *= 1.0 - slow_share(step);
                    chain.slow |= 1.0 - chain.all_fast >= 0.5;
                    self.chain.set(chain);
                }
                if chain.slow {
                    Exchanges::OneWayFirst
                } else {
                    Exchanges::BothWays
                }
            }
            x => x,
        };
        head_bytes(ranks, bytes, x, step)
    }
}

/// Of a rendezvous exchange of `bytes` each way between partners, how much the first way
/// delivers before the way back starts, in expectation: with two ranks the slow mode's
/// `bytes - tail` every time; with more, in the measured share of cases and nothing in the
/// others. A message within the tail crosses both ways at once whatever the ranks. Two ranks'
/// Sendrecvs (`testbed_mpi_p2p_2ranks.json`, 2026-11-26, and `..._2ranks_near_eager.json`,
/// 2026-11-29) took 1.95-2.00x a one-way Send from 1 MiB (the rule: 1.92-2.00x), 2.16x and
/// 1.37x at 128 KiB on the two days (1.37x), 1.27-1.52x at 64-96 KiB (1.00-1.16x) and 1.75x at
/// 192 KiB (1.58x); two ranks' butterfly reduce_scatter of 2 x 64 KiB took one way's time
/// (`testbed_mpi_butterfly_heldout.csv`). Until 2026-11-29 two ranks waited for all of it (2x
/// from 64 KiB), which the second day's log does not show below 1 MiB.
///
/// In mode `x` ([`Exchanges`]): the expected head (the share by what the `partners` did
/// before and how many pairs exchange in the step, [`slow_share`]), none (both ways at once) or
/// the slow mode's; the median of a step alone (a call's is [`CallExchanges`]').
pub(super) fn head_bytes(ranks: u32, bytes: u64, x: Exchanges, step: StepPairs) -> u64 {
    let slow_head = bytes.saturating_sub(SLOW_EXCHANGE_TAIL_BYTES);
    if ranks <= 2 {
        return slow_head;
    }
    match x {
        Exchanges::Expected => (slow_head as f64 * slow_share(step)).round() as u64,
        // A step alone: its median.
        Exchanges::Median if slow_share(step) >= 0.5 => slow_head,
        Exchanges::Median => 0,
        Exchanges::BothWays => 0,
        Exchanges::OneWayFirst => slow_head,
    }
}

/// A sendrecv between partners (each pair `(a, b)` with a < b) of a communicator of `ranks`:
/// both directions at once when eager. Above the eager limit the second direction starts once
/// the first has delivered its head in mode `x`, by what the `partners` did before and how many
/// pairs exchange in the step: `pairs`, all of the step's ([`head_bytes`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn exchange(
    s: &mut Schedule,
    pairs: &[(Endpoint, Endpoint)],
    bytes: u64,
    ranks: u32,
    (x, partners): (&CallExchanges, Partners),
    deps: Vec<OpId>,
    phase: Phase,
    step: u32,
) -> OpId {
    let all = StepPairs::all(partners, pairs.len() as u32);
    exchange_in_step(s, (pairs, all), bytes, ranks, x, deps, phase, step)
}

/// [`exchange`] of some of a step's pairs, the step's pairs being `step_pairs` in all (the
/// others in exchanges of their own: other sizes, or rank by rank; or partners that came to the
/// step apart, [`Histories`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn exchange_in_step(
    s: &mut Schedule,
    (pairs, step_pairs): (&[(Endpoint, Endpoint)], StepPairs),
    bytes: u64,
    ranks: u32,
    x: &CallExchanges,
    deps: Vec<OpId>,
    phase: Phase,
    step: u32,
) -> OpId {
    if is_eager(bytes) {
        x.even(pairs);
        let back = reversed(pairs);
        let both: Vec<(Endpoint, Endpoint)> = pairs.iter().chain(back.iter()).copied().collect();
        return message(s, &both, bytes, deps, phase, step);
    }
    let head = x
        .head_bytes(ranks, bytes, step_pairs, (phase, step))
        .min(bytes);
    // A slow exchange's first way goes from the partner that posts first.
    let pairs = &if head > 0 && ranks > 2 {
        x.oriented(pairs)
    } else {
        x.even(pairs);
        pairs.to_vec()
    };
    let back = reversed(pairs);
    let request = transfer(s, pairs.to_vec(), REQUEST_BYTES, deps, phase, step);
    let ack = transfer(s, back.clone(), ACK_BYTES, vec![request], phase, step);
    let first_head = match head {
        0 => ack,
        _ => transfer(s, pairs.to_vec(), head, vec![ack], phase, step),
    };
    let mut done = vec![message(s, &back, bytes, vec![first_head], phase, step)];
    if head < bytes {
        done.push(transfer(
            s,
            pairs.to_vec(),
            bytes - head,
            vec![first_head],
            phase,
            step,
        ));
    }
    join(s, done, phase, step)
}

/// What each rank of a call waits for before its next step where the call's exchanges are
/// played pair by pair: `coll/base` runs each step as a sendrecv with no synchronisation
/// between steps, so a pair starts its exchange once both partners are done with their own
/// previous steps (and reductions), whatever the other pairs do. A rank a non-power-of-two
/// fold leaves out starts the halving at once, while the fold's ranks still swap; partners
/// on slower links fall behind without holding up pairs that never meet them.
#[derive(Debug, Clone)]
pub(super) struct Ready(Vec<Vec<OpId>>);

impl Ready {
    /// `n` ranks entering together.
    pub(super) fn new(n: u32) -> Ready {
        Ready(vec![Vec::new(); n as usize])
    }

    /// Ranks that wait for `ops[r]` before their first step (`allreduce::entering`'s).
    pub(super) fn waiting(ops: Vec<Vec<OpId>>) -> Ready {
        Ready(ops)
    }

    /// What rank `r` waits for before its next step.
    pub(super) fn rank(&self, r: Endpoint) -> &[OpId] {
        &self.0[r as usize]
    }

    /// Rank `r` goes on once all of `ops` are done.
    pub(super) fn set_all(&mut self, r: Endpoint, ops: Vec<OpId>) {
        self.0[r as usize] = ops;
    }

    /// What a message or exchange between `ranks` waits for.
    pub(super) fn of(&self, ranks: &[Endpoint]) -> Vec<OpId> {
        let mut deps: Vec<OpId> = Vec::new();
        for &r in ranks {
            for &d in &self.0[r as usize] {
                if !deps.contains(&d) {
                    deps.push(d);
                }
            }
        }
        deps
    }

    /// `ranks` go on once `op` is done.
    pub(super) fn set(&mut self, ranks: &[Endpoint], op: OpId) {
        for &r in ranks {
            self.0[r as usize] = vec![op];
        }
    }
}

/// One step of exchanges played pair by pair ([`Ready`]): each pair of `pairs` (the step's
/// pairs being `step_pairs`) exchanges `bytes` as [`exchange_in_step`] plays it once both
/// partners are ready, then, where `reduced` gives bytes, each partner reduces that many.
#[allow(clippy::too_many_arguments)]
pub(super) fn exchanges_pair_by_pair(
    s: &mut Schedule,
    ready: &mut Ready,
    (pairs, step_pairs): (&[(Endpoint, Endpoint)], StepPairs),
    bytes: u64,
    ranks: u32,
    x: &CallExchanges,
    reduced: Option<u64>,
    phase: Phase,
    step: u32,
) {
    for &(a, b) in pairs {
        let deps = ready.of(&[a, b]);
        let mut done = exchange_in_step(
            s,
            (&[(a, b)], step_pairs),
            bytes,
            ranks,
            x,
            deps,
            phase,
            step,
        );
        if let Some(r) = reduced {
            done = super::reduce(s, 2, r, done, phase, step);
        }
        ready.set(&[a, b], done);
    }
}

#[cfg(test)]
pub(super) mod tests;
