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
/// the shares above (`Partners`).
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
pub(super) mod tests {
    use super::*;
    use crate::collective::{Collective, OpKind};

    /// Payload bytes each pair direction carries, requests and acknowledgements left out.
    fn data_bytes(s: &Schedule) -> u128 {
        crate::library::testing::payload_bytes(s, ACK_BYTES)
            - crate::library::testing::transfer_bytes(s, REQUEST_BYTES)
    }

    /// Op `at` of `s` is the way back's rendezvous request, and waits for op `after` alone.
    fn assert_back_request(s: &Schedule, at: usize, after: u32, why: &str) {
        let op = &s.ops[at];
        assert!(
            matches!(op.kind, OpKind::Transfer { bytes, .. } if bytes == REQUEST_BYTES),
            "op {at} is a request"
        );
        assert_eq!(op.deps, vec![OpId(after)], "{why}");
    }

    /// One pairwise exchange of `bytes` each way between ranks 0 and 1 of a communicator of
    /// `ranks`, alone in its schedule.
    fn one_exchange(ranks: u32, bytes: u64) -> Schedule {
        let mut s = Schedule::new(Collective::AllReduce, "t", ranks, bytes);
        exchange(
            &mut s,
            &[(0, 1)],
            bytes,
            ranks,
            (&CallExchanges::new(Exchanges::Expected), Partners::Entering),
            vec![],
            Phase::ReduceScatter,
            0,
        );
        s
    }

    #[test]
    fn a_slow_exchanges_first_way_goes_from_the_partner_that_posts_first() {
        // Step 1: pairs 0-1 and 2-3 enter alike, coins decide (0, then 1): 0 -> 1 and 3 -> 2
        // go first, so 1 and 2, who send the ways back, post their next requests first. Step
        // 2 meets an early and a late partner in each pair: 2 -> 0 and 1 -> 3 go first,
        // opposite ways (the 2:1 leaves' capture: 2 -> 0 first where 0 -> 1 had gone first).
        let x = CallExchanges::with_coins(Exchanges::OneWayFirst, Coins::Bits(0b10));
        assert_eq!(x.oriented(&[(0, 1), (2, 3)]), vec![(0, 1), (3, 2)]);
        assert_eq!(x.oriented(&[(0, 2), (1, 3)]), vec![(2, 0), (1, 3)]);
        // Partners who crossed both ways at once stand alike again: the next coin decides.
        x.even(&[(0, 2)]);
        assert_eq!(x.oriented(&[(2, 0)]), vec![(2, 0)]);
        let y = CallExchanges::with_coins(Exchanges::OneWayFirst, Coins::Bits(1 << 4));
        let _ = y.oriented(&[(0, 1), (2, 3)]);
        let _ = y.oriented(&[(0, 2), (1, 3)]);
        y.even(&[(0, 2)]);
        assert_eq!(y.oriented(&[(2, 0)]), vec![(0, 2)]);
    }

    /// Recursive doubling's two slow steps on four ranks, 4 MiB each way, under `x`.
    fn doubling(x: &CallExchanges) -> Schedule {
        let mut s = Schedule::new(Collective::AllGather, "t", 4, 4 << 20);
        let mut last = Vec::new();
        for (step, pairs) in [[(0, 1), (2, 3)], [(0, 2), (1, 3)]].iter().enumerate() {
            let partners = Partners::at_step(step as u32);
            let step = step as u32;
            let done = exchange(
                &mut s,
                pairs,
                4 << 20,
                4,
                (x, partners),
                last,
                Phase::AllGather,
                step,
            );
            last = vec![done];
        }
        s
    }

    #[test]
    fn a_call_plays_every_way_its_coins_fall_a_sample_of_many_and_one_way_past_the_limit() {
        // Four coins (two slow steps of two pairs): all sixteen ways. In a quarter of them the
        // second step's first ways cross from ranks 0-1 to 2-3 together or back together
        // (partners that stand alike in both pairs, and the coins send them the same way);
        // in the others they go opposite ways, as the 2:1 leaves' capture shows.
        let (first, others) = oriented_ways(Exchanges::OneWayFirst, 4, doubling);
        assert_eq!(others.len(), 15);
        let head = (4 << 20) - SLOW_EXCHANGE_TAIL_BYTES;
        let together = std::iter::once(&first)
            .chain(&others)
            .filter(|s| {
                let firsts: Vec<bool> = s
                    .ops
                    .iter()
                    .filter(|o| o.step == 1)
                    .filter_map(|o| match o.kind {
                        OpKind::Transfer { pattern, bytes } if bytes == head => Some(pattern),
                        _ => None,
                    })
                    .flat_map(|p| s.patterns[p.0 as usize].pairs.to_vec())
                    .map(|(from, _)| from < 2)
                    .collect();
                assert_eq!(firsts.len(), 2);
                firsts[0] == firsts[1]
            })
            .count();
        assert_eq!(together, 4);
        // Both ways at once: nothing to orient, one way.
        let (_, none) = oriented_ways(Exchanges::BothWays, 4, doubling);
        assert!(none.is_empty());
        // Past the communicators a call is played every way for: one way.
        let (_, none) = oriented_ways(Exchanges::OneWayFirst, ORIENTED_RANKS_MAX + 1, doubling);
        assert!(none.is_empty());
    }

    #[test]
    fn rendezvous_exchanges_start_the_second_direction_after_the_expected_head() {
        // Two ranks: the way back starts once the first way has all but the tail delivered.
        let s = one_exchange(2, 1 << 20);
        let head = (1 << 20) - SLOW_EXCHANGE_TAIL_BYTES;
        assert!(matches!(s.ops[2].kind, OpKind::Transfer { bytes, .. } if bytes == head));
        assert_back_request(
            &s,
            3,
            2,
            "two ranks: the way back waits for all but the tail",
        );
        assert_eq!(data_bytes(&s), 2 << 20);
        // Four ranks: the way back starts once the first way has delivered its expected head.
        let s = one_exchange(4, 1 << 20);
        let head = head_bytes(
            4,
            1 << 20,
            Exchanges::Expected,
            StepPairs::all(Partners::Entering, 1),
        );
        assert!(matches!(s.ops[2].kind, OpKind::Transfer { bytes, .. } if bytes == head));
        assert_back_request(&s, 3, 2, "the way back waits for the head");
        assert_eq!(
            data_bytes(&s),
            2 << 20,
            "each way carries the whole message once"
        );
        let s = one_exchange(2, 16 << 10);
        assert_eq!(s.ops.len(), 1, "eager messages cross at once");
    }

    #[test]
    fn the_median_call_runs_slow_from_the_step_by_which_half_the_calls_have_gone_slow() {
        // One pair entering runs slow 34% of the time: fast in the median call. A second such
        // step makes it 57% that one of the two ran slow: the median call is slow from there,
        // and stays slow through a third step that alone would run fast.
        let x = CallExchanges::new(Exchanges::Median);
        let one = StepPairs::all(Partners::Entering, 1);
        let slow_head = (4 << 20) - SLOW_EXCHANGE_TAIL_BYTES;
        let head = |step: u32| x.head_bytes(4, 4 << 20, one, (Phase::ReduceScatter, step));
        // Exchanges within the tail are never slow: not a step of the chain.
        assert_eq!(
            x.head_bytes(4, 80 << 10, one, (Phase::AllGather, 9)),
            0,
            "within the tail"
        );
        assert_eq!(head(0), 0, "34% slow");
        assert_eq!(head(0), 0, "the same step again: counted once");
        assert_eq!(head(1), slow_head, "57% slow by now");
        assert_eq!(head(2), slow_head, "slow to the call's end");
        // Each call its own chain; two ranks run slow whatever the chain.
        let y = CallExchanges::new(Exchanges::Median);
        assert_eq!(y.head_bytes(4, 4 << 20, one, (Phase::ReduceScatter, 1)), 0);
        assert_eq!(
            y.head_bytes(2, 4 << 20, one, (Phase::AllGather, 0)),
            slow_head
        );
        // The expected mode keeps each step at its own share.
        let e = CallExchanges::new(Exchanges::Expected);
        let expected = head_bytes(4, 4 << 20, Exchanges::Expected, one);
        for step in 0..3 {
            assert_eq!(
                e.head_bytes(4, 4 << 20, one, (Phase::ReduceScatter, step)),
                expected
            );
        }
    }

    #[test]
    fn partners_that_come_to_a_step_apart_run_it_at_the_polling_share() {
        // Rabenseifner on six ranks folds 0-1 and 2-3 into 0 and 2 while 4 and 5 go on: the
        // halving's first step pairs 0-2 (both folded) and 4-5 (neither): alike, entering; its
        // second pairs 0-4 and 2-5, whose partners come to it apart: polling.
        let mut h = Histories::new(6, [0, 2]);
        let entering = StepPairs::all(Partners::Entering, 2);
        let polling = StepPairs::all(Partners::Polling, 2);
        assert_eq!(h.step(&[(0, 2), (4, 5)], Partners::Entering), entering);
        assert_eq!(h.step(&[(0, 4), (2, 5)], Partners::Entering), polling);
        // After an exchange its partners are alike.
        assert_eq!(h.step(&[(0, 4), (2, 5)], Partners::Entering), entering);
        // With no fold every rank does the same: recursive doubling on four ranks.
        let mut h = Histories::new(4, []);
        assert_eq!(h.step(&[(0, 1), (2, 3)], Partners::Entering), entering);
        assert_eq!(h.step(&[(0, 2), (1, 3)], Partners::Entering), entering);
    }

    #[test]
    fn the_expected_head_is_the_slow_modes_head_times_how_often_the_step_ran_slow() {
        // The slow mode delivers all but the measured tail before the way back starts. Partners
        // entering together: 181 of 320 four-rank repetitions (two pairs at once) ran slow.
        // Partners that had just waited on the call's previous step: 95 of 106 captured
        // exchanges, counted pair by pair.
        let two_pairs_entering = 181.0 / 320.0;
        let one_pair_entering = 1.0 - (1.0f64 - two_pairs_entering).sqrt();
        let one_pair_polling = 95.0 / 106.0;
        for (partners, step_pairs, share) in [
            (Partners::Entering, 2, two_pairs_entering),
            (Partners::Entering, 1, one_pair_entering),
            (Partners::Polling, 1, one_pair_polling),
            (Partners::Polling, 2, 1.0 - (1.0 - one_pair_polling).powi(2)),
        ] {
            for bytes in [128u64 << 10, 256 << 10, 1 << 20, 16 << 20] {
                let slow_head = bytes - SLOW_EXCHANGE_TAIL_BYTES;
                let expected = (slow_head as f64 * share).round() as u64;
                let step = StepPairs::all(partners, step_pairs);
                let head = head_bytes(4, bytes, Exchanges::Expected, step);
                assert_eq!(
                    head, expected,
                    "{bytes} B, {partners:?}, {step_pairs} pairs"
                );
                assert_eq!(
                    head_bytes(2, bytes, Exchanges::Expected, StepPairs::all(partners, 1)),
                    slow_head,
                    "two ranks: the slow mode every time"
                );
            }
        }
        // A step is as slow as its slowest pair: eight ranks' four pairs ran slow in 120 of
        // 150 repetitions, which the two-pair share says within two points.
        let four_pairs = slow_share(StepPairs::all(Partners::Entering, 4));
        assert!((four_pairs - 120.0 / 150.0).abs() < 0.02, "{four_pairs}");
        assert!(slow_share(StepPairs::all(Partners::Entering, 8)) > four_pairs);
        // A forced mode holds whatever the partners did and however many pairs.
        for partners in [Partners::Entering, Partners::Polling] {
            let two = StepPairs::all(partners, 2);
            assert_eq!(head_bytes(4, 1 << 20, Exchanges::BothWays, two), 0);
            assert_eq!(
                head_bytes(
                    8,
                    1 << 20,
                    Exchanges::OneWayFirst,
                    StepPairs::all(partners, 4)
                ),
                (1 << 20) - SLOW_EXCHANGE_TAIL_BYTES
            );
        }
        // A message just above the eager limit fits in the tail: both ways at once, on two
        // ranks too.
        assert_eq!(
            head_bytes(
                4,
                80 << 10,
                Exchanges::Expected,
                StepPairs::all(Partners::Polling, 2)
            ),
            0
        );
        assert_eq!(
            head_bytes(
                2,
                80 << 10,
                Exchanges::Expected,
                StepPairs::all(Partners::Entering, 1)
            ),
            0
        );
        let s = one_exchange(4, 80 << 10);
        assert_back_request(&s, 2, 1, "the way back waits only for the answer");
        assert_eq!(data_bytes(&s), 2 * (80 << 10));
    }

    /// Every op `op` waits for, directly or not.
    pub(in crate::library::mpi) fn ancestors(
        s: &Schedule,
        op: usize,
    ) -> std::collections::BTreeSet<usize> {
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = vec![op];
        while let Some(o) = todo.pop() {
            for d in &s.ops[o].deps {
                if seen.insert(d.0 as usize) {
                    todo.push(d.0 as usize);
                }
            }
        }
        seen
    }

    /// The ops that move bytes between ranks `a` and `b`, either way, in order.
    pub(in crate::library::mpi) fn between(s: &Schedule, a: Endpoint, b: Endpoint) -> Vec<usize> {
        (0..s.ops.len())
            .filter(|&i| match s.ops[i].kind {
                OpKind::Transfer { pattern, .. } => s.patterns[pattern.0 as usize]
                    .pairs
                    .iter()
                    .any(|&p| p == (a, b) || p == (b, a)),
                _ => false,
            })
            .collect()
    }

    #[test]
    fn pairs_exchange_once_both_partners_are_ready_not_once_the_whole_step_is() {
        // Three steps of recursive doubling on eight ranks, pair by pair: the second step's
        // pair 0-2 waits for 0-1 and 2-3 (its partners' first steps), never for 4-5 or 6-7.
        let x = CallExchanges::new(Exchanges::Median);
        let mut s = Schedule::new(Collective::AllGather, "t", 8, 1 << 20);
        let mut ready = Ready::new(8);
        for (step, distance) in [1u32, 2, 4].into_iter().enumerate() {
            let pairs: Vec<(Endpoint, Endpoint)> = (0..8)
                .filter(|r| r & distance == 0)
                .map(|r| (r, r ^ distance))
                .collect();
            let mix = StepPairs::all(Partners::at_step(step as u32), pairs.len() as u32);
            let reduced = Some(1 << 20);
            exchanges_pair_by_pair(
                &mut s,
                &mut ready,
                (&pairs, mix),
                1 << 20,
                8,
                &x,
                reduced,
                Phase::ReduceScatter,
                step as u32,
            );
        }
        s.validate().unwrap();
        let first_of_0_2 = between(&s, 0, 2)[0];
        let waits = ancestors(&s, first_of_0_2);
        for (a, b) in [(0, 1), (2, 3)] {
            assert!(
                between(&s, a, b).iter().all(|o| waits.contains(o)),
                "{a}-{b}"
            );
        }
        for (a, b) in [(4, 5), (6, 7)] {
            assert!(
                between(&s, a, b).iter().all(|o| !waits.contains(o)),
                "{a}-{b}"
            );
        }
        // The last step's pair 0-4 waits for everything 0 and 4 did, so for all four pairs
        // of the first step, but not for 1-3, which it never met.
        let waits = ancestors(&s, between(&s, 0, 4)[0]);
        assert!(between(&s, 4, 5).iter().all(|o| waits.contains(o)));
        assert!(between(&s, 1, 3).iter().all(|o| !waits.contains(o)));
        // Both partners reduce what they received: one reduction of two ranks per pair and step.
        let reductions = s
            .ops
            .iter()
            .filter(|op| matches!(op.kind, OpKind::Reduce { endpoints: 2, .. }))
            .count();
        assert_eq!(reductions, 3 * 4);
    }
}
