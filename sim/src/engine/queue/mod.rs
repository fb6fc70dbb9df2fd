//! The event queue: events ordered by (time, scheduling order), with cancellation handles.
//!
//! # How it works
//!
//! Time only moves forward: nothing may be scheduled before the last delivered event. That makes
//! a *radix heap* possible. Times are read as eleven 6-bit digits. An event is filed by the
//! highest digit (its *level*) in which its time differs from `last_ps`, the time of the last
//! delivered event, and by its own digit there: bucket (level, digit). Buckets in (level, digit)
//! order hold increasing, disjoint time ranges, and level 0 buckets hold one exact time each;
//! the bucket of `last_ps` itself is the "front". Delivery takes the first non-empty bucket: at
//! level 0 it is the next time, delivered first-in first-out; at a higher level, the bucket is
//! emptied into lower levels around its smallest time, which becomes `last_ps`. Each move lowers
//! an event by at least one level, so it moves at most ten times and in practice two or three:
//! scheduling and delivery are O(1) amortised, and all moves are sequential scans. One 64-bit
//! word per level says which of its buckets are non-empty, so the first one is two bit scans away.
//!
//! Same-time events stay in scheduling order without storing a sequence number: a bucket is
//! filled only by appending newly scheduled events (later than everything already queued) or by
//! an in-order scan of a higher bucket into lower buckets, which are all empty then; so every
//! bucket is always in scheduling order, and events with equal times always share a bucket.
//!
//! A bucket above level 0 fills a buffer of `CHUNK_ENTRIES` entries; a full buffer moves, as a
//! whole, into a pool of chunks where the bucket keeps a chain of them, and the bucket takes a
//! spare buffer from the pool. So every bucket holds one small buffer of its own and memory
//! follows the number of stored events, not the sum of each bucket's past peaks.
//!
//! Events are stored inline in the buckets, each with a slot in a slot table that holds a
//! generation counter and a "cancelled" bit; a handle is (slot, generation). Cancelling bumps the
//! generation (so the handle goes stale) and sets the bit: the entry becomes a tombstone, skipped
//! when it surfaces, and its slot is reused once the tombstone is gone. Tombstones are swept out
//! whenever they outnumber the live events, so a model that cancels and reschedules constantly
//! uses memory proportional to its pending events. Delivering an event reads only the cancelled
//! bit (an eighth of a byte per slot, so it stays in cache) and writes the next generation
//! without reading it. After warm-up the queue allocates nothing: the buffers, the chunk pool and
//! the slot table keep their capacity; only a level-0 bucket gives back a buffer of more than
//! `EXACT_KEPT_CAPACITY` entries when it empties, so that rare bursts of same-time events do not
//! pin memory. The payload of a cancelled event is dropped when its tombstone is swept or
//! surfaces.

use std::collections::VecDeque;

use super::SimTime;

/// Identifies one scheduled event, for cancelling it.
///
/// A handle stays valid forever: once its event is delivered or cancelled, cancelling it again
/// does nothing, even after the queue reused its storage for another event.
#[must_use = "an event handle is the only way to cancel the event; drop it explicitly if unused"]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventHandle {
    slot: u32,
    generation: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("cannot schedule an event at {at} before the current time {now}")]
    InThePast { at: SimTime, now: SimTime },
}

/// Bits per radix digit: 6, so that the buckets of one level fit one 64-bit bitmap word.
const DIGIT_BITS: u32 = 6;
/// Values of one digit, and buckets per level.
const DIGIT_VALUES: usize = 1 << DIGIT_BITS;
/// Digits in a `u64` time (the top one has 4 bits).
const LEVELS: usize = 64usize.div_ceil(DIGIT_BITS as usize);
/// Buckets at levels 1 and above.
const UPPER_BUCKETS: usize = (LEVELS - 1) * DIGIT_VALUES;
/// Entries per chunk of an upper bucket (tiny under test, so that tests cross chunks).
const CHUNK_ENTRIES: usize = if cfg!(test) { 3 } else { 128 };
/// Largest buffer capacity a level-0 bucket keeps when it empties (tiny under test).
const EXACT_KEPT_CAPACITY: usize = if cfg!(test) { 4 } else { 1024 };

/// Tombstones tolerated before a sweep, whatever the number of live events (tiny under test,
/// so that the property tests exercise sweeps).
const MIN_TOMBSTONES_BEFORE_SWEEP: usize = if cfg!(test) { 4 } else { 1024 };

/// A priority queue of events of type `E`, delivered in (time, scheduling order) order.
///
/// Keep `E` small (a closed enum of ids): events move when buckets are redistributed.
#[derive(Debug)]
pub struct EventQueue<E> {
    /// Level 0: `exact[d]` holds the entries at time `(last_ps & !63) | d`, in scheduling order.
    exact: Box<[VecDeque<Entry<E>>]>,
    /// Levels 1 and above: bucket (level, digit) is number `(level - 1) * 64 + digit`.
    upper: UpperBuckets<E>,
    /// Smallest time in each upper bucket (tombstones included); `u64::MAX` when empty.
    upper_min_ps: Box<[u64]>,
    nonempty: NonEmptyBuckets,
    /// The time the buckets are relative to; moves ahead inside `pop` and equals `now` between
    /// calls, so that anything schedulable files relative to it.
    last_ps: u64,
    now: SimTime,
    slots: SlotTable,
    /// Pending events (not delivered, not cancelled).
    live: usize,
    /// Cancelled entries still stored in the buckets.
    tombstones: usize,
    /// When set, the exact time of the earliest pending event (used only while no level-0
    /// bucket is non-empty; cleared by every delivery and cancellation).
    earliest_ps: Option<u64>,
}

#[derive(Debug)]
struct Entry<E> {
    time_ps: u64,
    slot: u32,
    generation: u32,
    event: E,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            exact: (0..DIGIT_VALUES).map(|_| VecDeque::new()).collect(),
            upper: UpperBuckets::default(),
            upper_min_ps: vec![u64::MAX; UPPER_BUCKETS].into_boxed_slice(),
            nonempty: NonEmptyBuckets::default(),
            last_ps: 0,
            now: SimTime::ZERO,
            slots: SlotTable::default(),
            live: 0,
            tombstones: 0,
            earliest_ps: None,
        }
    }

    /// The time of the last delivered event (zero before the first).
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Number of scheduled, not yet delivered or cancelled events.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Schedules `event` at absolute time `at` (which may equal `now`).
    ///
    /// # Panics
    ///
    /// If more than 2³² events would be pending at once.
    pub fn schedule(&mut self, at: SimTime, event: E) -> Result<EventHandle, ScheduleError> {
        if at < self.now {
            return Err(ScheduleError::InThePast { at, now: self.now });
        }
        Ok(self.insert_new(at.as_ps(), event))
    }

    /// Schedules `event` `delay` after now (saturating at [`SimTime::MAX`]).
    pub fn schedule_in(&mut self, delay: SimTime, event: E) -> EventHandle {
        self.insert_new(self.now.saturating_add(delay).as_ps(), event)
    }

    /// Cancels a scheduled event. Returns true if it was still pending.
    pub fn cancel(&mut self, handle: EventHandle) -> bool {
        if !self.slots.is_pending(handle) {
            return false;
        }
        self.slots.cancel(handle);
        self.live -= 1;
        self.tombstones += 1;
        self.earliest_ps = None;
        if self.tombstones >= MIN_TOMBSTONES_BEFORE_SWEEP && self.tombstones > self.live {
            self.sweep_tombstones();
        }
        true
    }

    /// Removes and returns the next event, advancing `now` to its time.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        loop {
            let Some(bucket) = self.nonempty.first() else {
                // Delivered tombstones may have moved `last_ps` past `now`; nothing is stored.
                debug_assert_eq!((self.live, self.tombstones), (0, 0));
                self.last_ps = self.now.as_ps();
                return None;
            };
            let entry = if bucket.level == 0 {
                let entries = &mut self.exact[bucket.digit as usize];
                let entry = entries
                    .pop_front()
                    .expect("a non-empty bucket has an entry");
                if entries.is_empty() {
                    if entries.capacity() > EXACT_KEPT_CAPACITY {
                        *entries = VecDeque::new();
                    }
                    self.nonempty.clear(bucket);
                }
                entry
            } else if let Some(entry) = self.upper.pop_if_single(bucket.upper_index()) {
                // A lone entry in the first bucket is the next event: no need to move it down.
                self.upper_min_ps[bucket.upper_index()] = u64::MAX;
                self.nonempty.clear(bucket);
                entry
            } else {
                self.redistribute(bucket);
                continue;
            };
            // The entry agrees with `last_ps` above its bucket's level and is the smallest time
            // stored, so every other bucket stays valid relative to it.
            self.last_ps = entry.time_ps;
            if self.slots.is_cancelled(entry.slot) {
                self.slots.release_tombstone(entry.slot, entry.generation);
                self.tombstones -= 1;
                continue;
            }
            self.slots.release_delivered(entry.slot, entry.generation);
            self.live -= 1;
            self.earliest_ps = None;
            self.now = SimTime::from_ps(entry.time_ps);
            return Some((self.now, entry.event));
        }
    }

    /// The time of the next pending event without removing it.
    ///
    /// O(1) when the next event agrees with the last delivered one above the lowest six bits
    /// (a level-0 bucket), or when nothing was delivered or cancelled since the previous call;
    /// otherwise a scan of the bucket holding the next event.
    pub fn peek_time(&mut self) -> Option<SimTime> {
        while let Some(bucket) = self.nonempty.first() {
            if bucket.level == 0 {
                let entries = &mut self.exact[bucket.digit as usize];
                let entry = entries.front().expect("a non-empty bucket has an entry");
                if !self.slots.is_cancelled(entry.slot) {
                    return Some(SimTime::from_ps(entry.time_ps));
                }
                self.slots.release_tombstone(entry.slot, entry.generation);
                entries.pop_front();
                self.tombstones -= 1;
                if entries.is_empty() {
                    self.nonempty.clear(bucket);
                }
                continue;
            }
            if let Some(t) = self.earliest_ps {
                return Some(SimTime::from_ps(t));
            }
            // The buckets must stay relative to `now` (later calls may schedule between `now`
            // and the next event), so find the bucket's minimum instead of redistributing it.
            self.tombstones -= self.retain_live(bucket);
            if self.nonempty.contains(bucket) {
                let min_ps = self.upper_min_ps[bucket.upper_index()];
                self.earliest_ps = Some(min_ps);
                return Some(SimTime::from_ps(min_ps));
            }
        }
        None
    }

    fn insert_new(&mut self, time_ps: u64, event: E) -> EventHandle {
        let (slot, generation) = self.slots.acquire();
        self.insert(Entry {
            time_ps,
            slot,
            generation,
            event,
        });
        self.live += 1;
        if let Some(t) = self.earliest_ps {
            self.earliest_ps = Some(t.min(time_ps));
        }
        EventHandle { slot, generation }
    }

    /// Files an entry (with `time_ps >= last_ps`) into its bucket.
    #[inline]
    fn insert(&mut self, entry: Entry<E>) {
        debug_assert!(entry.time_ps >= self.last_ps);
        let bucket = bucket_of(entry.time_ps, self.last_ps);
        self.nonempty.set(bucket);
        if bucket.level == 0 {
            self.exact[bucket.digit as usize].push_back(entry);
        } else {
            let i = bucket.upper_index();
            self.upper_min_ps[i] = self.upper_min_ps[i].min(entry.time_ps);
            self.upper.push(i, entry);
        }
    }

    /// Empties the first non-empty bucket, at level 1 or above, into the lower levels, relative
    /// to its smallest time.
    fn redistribute(&mut self, source: Bucket) {
        let i = source.upper_index();
        let last_ps = self.upper_min_ps[i];
        self.last_ps = last_ps;
        self.upper_min_ps[i] = u64::MAX;
        self.nonempty.clear(source);
        // Every entry lands in a lower level (all empty now), so the source's storage can be
        // taken out while filing: first its full chunks, in order, then its own buffer.
        let mut touched_levels = 0u64;
        let mut chunk = std::mem::replace(&mut self.upper.full[i], Chain::EMPTY).head;
        while chunk != NIL {
            let mut entries = std::mem::take(&mut self.upper.pool.chunks[chunk as usize]);
            for entry in entries.drain(..) {
                touched_levels |= self.file_lower(entry, last_ps, source);
            }
            self.upper.pool.chunks[chunk as usize] = entries;
            chunk = self.upper.pool.release(chunk);
        }
        let mut entries = std::mem::take(&mut self.upper.filling[i]);
        for entry in entries.drain(..) {
            touched_levels |= self.file_lower(entry, last_ps, source);
        }
        self.upper.filling[i] = entries;
        self.nonempty.summary |= touched_levels;
    }

    /// Files an entry during a redistribution of `source` around `last_ps`; gives its level's
    /// summary bit, which the caller sets once at the end.
    #[inline(always)]
    fn file_lower(&mut self, entry: Entry<E>, last_ps: u64, source: Bucket) -> u64 {
        let target = bucket_of(entry.time_ps, last_ps);
        debug_assert!(target.level < source.level);
        self.nonempty.set_unsummarized(target);
        if target.level == 0 {
            self.exact[target.digit as usize].push_back(entry);
        } else {
            let j = target.upper_index();
            self.upper_min_ps[j] = self.upper_min_ps[j].min(entry.time_ps);
            self.upper.push(j, entry);
        }
        1 << target.level
    }

    /// Drops the tombstones of a bucket (recomputing its minimum at the upper levels); returns
    /// how many.
    fn retain_live(&mut self, bucket: Bucket) -> usize {
        let slots = &mut self.slots;
        let (removed, now_empty) = if bucket.level == 0 {
            let entries = &mut self.exact[bucket.digit as usize];
            let before = entries.len();
            entries.retain(|e| slots.keep_unless_cancelled(e.slot, e.generation));
            (before - entries.len(), entries.is_empty())
        } else {
            let i = bucket.upper_index();
            let mut min_ps = u64::MAX;
            let removed = self.upper.retain(i, |e| {
                let live = slots.keep_unless_cancelled(e.slot, e.generation);
                if live {
                    min_ps = min_ps.min(e.time_ps);
                }
                live
            });
            self.upper_min_ps[i] = min_ps;
            (removed, self.upper.is_empty(i))
        };
        if now_empty {
            self.nonempty.clear(bucket);
        }
        removed
    }

    /// Removes every tombstone (order-preserving, so FIFO order survives).
    fn sweep_tombstones(&mut self) {
        let mut removed = 0;
        for level in 0..LEVELS as u32 {
            for digit in 0..DIGIT_VALUES as u32 {
                let bucket = Bucket { level, digit };
                if self.nonempty.contains(bucket) {
                    removed += self.retain_live(bucket);
                }
            }
        }
        debug_assert_eq!(removed, self.tombstones);
        self.tombstones = 0;
    }

    /// Entries the buffers could hold without allocating.
    #[cfg(test)]
    fn stored_capacity(&self) -> usize {
        self.exact.iter().map(VecDeque::capacity).sum::<usize>()
            + self.upper.filling.iter().map(Vec::capacity).sum::<usize>()
            + self
                .upper
                .pool
                .chunks
                .iter()
                .map(Vec::capacity)
                .sum::<usize>()
    }

    #[cfg(test)]
    fn stored_entries(&self) -> usize {
        self.exact.iter().map(VecDeque::len).sum::<usize>()
            + self.upper.filling.iter().map(Vec::len).sum::<usize>()
            + self.upper.pool.chunks.iter().map(Vec::len).sum::<usize>()
    }
}

/// The bucket of `time_ps` relative to `last_ps <= time_ps`: level is the index of the highest
/// digit where the two differ (0 if equal), digit is `time_ps`'s digit there.
#[inline]
fn bucket_of(time_ps: u64, last_ps: u64) -> Bucket {
    let differing = time_ps ^ last_ps;
    let level = (63 - (differing | 1).leading_zeros()) / DIGIT_BITS;
    let digit = (time_ps >> (level * DIGIT_BITS)) as u32 & (DIGIT_VALUES as u32 - 1);
    Bucket { level, digit }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    level: u32,
    digit: u32,
}

impl Bucket {
    /// Index into the upper-level tables (level 1 and above).
    #[inline]
    fn upper_index(self) -> usize {
        debug_assert!(self.level > 0);
        (self.level as usize - 1) * DIGIT_VALUES + self.digit as usize
    }
}

/// Storage of the buckets above level 0. Bucket `i` appends to its own buffer `filling[i]`
/// (at most `CHUNK_ENTRIES` entries); when the buffer is full it becomes a chunk at the end of
/// the bucket's chain `full[i]`, and a spare buffer from the pool takes its place. Entries run
/// in order through the chain, then the buffer.
#[derive(Debug)]
struct UpperBuckets<E> {
    filling: Box<[Vec<Entry<E>>]>,
    full: Box<[Chain]>,
    pool: ChunkPool<E>,
}

impl<E> Default for UpperBuckets<E> {
    fn default() -> Self {
        UpperBuckets {
            filling: (0..UPPER_BUCKETS).map(|_| Vec::new()).collect(),
            full: vec![Chain::EMPTY; UPPER_BUCKETS].into_boxed_slice(),
            pool: ChunkPool::default(),
        }
    }
}

impl<E> UpperBuckets<E> {
    #[inline]
    fn push(&mut self, i: usize, entry: Entry<E>) {
        if self.filling[i].len() == self.filling[i].capacity() {
            self.make_room(i);
        }
        self.filling[i].push(entry);
    }

    /// Gives a bucket's full buffer to its chain and takes a spare one, or sizes a new buffer.
    #[cold]
    fn make_room(&mut self, i: usize) {
        let filling = &mut self.filling[i];
        if filling.len() < CHUNK_ENTRIES {
            filling.reserve_exact(CHUNK_ENTRIES - filling.len());
            return;
        }
        let chunk = self.pool.acquire();
        std::mem::swap(filling, &mut self.pool.chunks[chunk as usize]);
        let chain = &mut self.full[i];
        if chain.tail == NIL {
            chain.head = chunk;
        } else {
            self.pool.next[chain.tail as usize] = chunk;
        }
        chain.tail = chunk;
    }

    #[inline]
    fn is_empty(&self, i: usize) -> bool {
        self.full[i].is_empty() && self.filling[i].is_empty()
    }

    /// Removes and returns the entry of a bucket that holds exactly one.
    #[inline]
    fn pop_if_single(&mut self, i: usize) -> Option<Entry<E>> {
        if self.full[i].is_empty() && self.filling[i].len() == 1 {
            self.filling[i].pop()
        } else {
            None
        }
    }

    /// Keeps the entries for which `keep` is true, in order; returns how many were dropped.
    fn retain(&mut self, i: usize, mut keep: impl FnMut(&Entry<E>) -> bool) -> usize {
        let mut removed = 0;
        let mut kept = Chain::EMPTY;
        let mut chunk = self.full[i].head;
        while chunk != NIL {
            let entries = &mut self.pool.chunks[chunk as usize];
            let before = entries.len();
            entries.retain(&mut keep);
            removed += before - entries.len();
            if entries.is_empty() {
                chunk = self.pool.release(chunk);
                continue;
            }
            if kept.tail == NIL {
                kept.head = chunk;
            } else {
                self.pool.next[kept.tail as usize] = chunk;
            }
            kept.tail = chunk;
            chunk = std::mem::replace(&mut self.pool.next[chunk as usize], NIL);
        }
        self.full[i] = kept;
        let before = self.filling[i].len();
        self.filling[i].retain(&mut keep);
        removed + before - self.filling[i].len()
    }
}

/// No chunk.
const NIL: u32 = u32::MAX;

/// A bucket's full chunks, first to last; both `NIL` when there are none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chain {
    head: u32,
    tail: u32,
}

impl Chain {
    const EMPTY: Chain = Chain {
        head: NIL,
        tail: NIL,
    };

    #[inline]
    fn is_empty(self) -> bool {
        self.head == NIL
    }
}

/// Chunks of entries, each in at most one chain; a released chunk keeps its (empty) buffer as
/// a spare. The pool never shrinks, so after warm-up nothing is allocated.
#[derive(Debug)]
struct ChunkPool<E> {
    chunks: Vec<Vec<Entry<E>>>,
    /// The next chunk in the same chain, or `NIL`.
    next: Vec<u32>,
    spare: Vec<u32>,
}

impl<E> Default for ChunkPool<E> {
    fn default() -> Self {
        ChunkPool {
            chunks: Vec::new(),
            next: Vec::new(),
            spare: Vec::new(),
        }
    }
}

impl<E> ChunkPool<E> {
    /// A chunk holding an empty buffer of `CHUNK_ENTRIES` capacity, in no chain.
    fn acquire(&mut self) -> u32 {
        if let Some(chunk) = self.spare.pop() {
            return chunk;
        }
        let chunk = u32::try_from(self.chunks.len()).expect("fewer than 2^32 chunks");
        self.chunks.push(Vec::with_capacity(CHUNK_ENTRIES));
        self.next.push(NIL);
        chunk
    }

    /// Returns an emptied chunk to the spares; gives the chunk that followed it.
    #[inline]
    fn release(&mut self, chunk: u32) -> u32 {
        debug_assert!(self.chunks[chunk as usize].is_empty());
        self.spare.push(chunk);
        std::mem::replace(&mut self.next[chunk as usize], NIL)
    }
}

/// Which buckets are non-empty: one word per level, one bit per digit, and one summary bit per
/// level with a non-empty bucket.
#[derive(Debug, Default)]
struct NonEmptyBuckets {
    levels: [u64; LEVELS],
    summary: u64,
}

impl NonEmptyBuckets {
    #[inline]
    fn set(&mut self, bucket: Bucket) {
        self.levels[bucket.level as usize] |= 1 << bucket.digit;
        self.summary |= 1 << bucket.level;
    }

    /// Sets a bucket's bit but not its level's summary bit, which the caller must set.
    #[inline]
    fn set_unsummarized(&mut self, bucket: Bucket) {
        self.levels[bucket.level as usize] |= 1 << bucket.digit;
    }

    #[inline]
    fn clear(&mut self, bucket: Bucket) {
        let word = &mut self.levels[bucket.level as usize];
        *word &= !(1 << bucket.digit);
        if *word == 0 {
            self.summary &= !(1 << bucket.level);
        }
    }

    #[inline]
    fn contains(&self, bucket: Bucket) -> bool {
        self.levels[bucket.level as usize] & (1 << bucket.digit) != 0
    }

    /// The first non-empty bucket, which holds the earliest stored times.
    #[inline]
    fn first(&self) -> Option<Bucket> {
        if self.summary == 0 {
            return None;
        }
        let level = self.summary.trailing_zeros();
        let digit = self.levels[level as usize].trailing_zeros();
        Some(Bucket { level, digit })
    }
}

/// Per-slot generation counters and cancelled bits.
///
/// A slot belongs to one stored entry from scheduling until the entry leaves the queue
/// (delivered, or a cancelled entry swept or surfaced); then it is freed, and reused with the
/// next generation. Generations are odd while the event is pending, so neither a handle to a
/// delivered event nor one to a cancelled event ever matches. An entry is live iff its slot's
/// cancelled bit is clear. A slot whose counter would wrap is retired instead of reused (one
/// slot per 2³¹ reuses).
#[derive(Debug, Default)]
struct SlotTable {
    generations: Vec<u32>,
    /// Bit `slot % 64` of word `slot / 64`: the slot's entry is a tombstone.
    cancelled: Vec<u64>,
    /// Free slots with their current (even) generation.
    free: Vec<(u32, u32)>,
}

impl SlotTable {
    /// A slot and generation for a new pending event.
    #[inline]
    fn acquire(&mut self) -> (u32, u32) {
        if let Some((slot, generation)) = self.free.pop() {
            let generation = generation + 1;
            self.generations[slot as usize] = generation;
            (slot, generation)
        } else {
            let slot = u32::try_from(self.generations.len())
                .expect("an event queue holds at most 2^32 pending events");
            self.generations.push(1);
            if slot % 64 == 0 {
                self.cancelled.push(0);
            }
            (slot, 1)
        }
    }

    /// Whether the handle's event is still pending (neither delivered nor cancelled).
    #[inline]
    fn is_pending(&self, handle: EventHandle) -> bool {
        self.generations.get(handle.slot as usize) == Some(&handle.generation)
    }

    /// Turns a pending event's entry into a tombstone.
    #[inline]
    fn cancel(&mut self, handle: EventHandle) {
        self.generations[handle.slot as usize] = handle.generation.wrapping_add(1);
        self.cancelled[handle.slot as usize / 64] |= 1 << (handle.slot % 64);
    }

    #[inline]
    fn is_cancelled(&self, slot: u32) -> bool {
        self.cancelled[slot as usize / 64] & (1 << (slot % 64)) != 0
    }

    /// Frees the slot of a live entry that is being delivered (without reading its counter).
    #[inline]
    fn release_delivered(&mut self, slot: u32, generation: u32) {
        let next = generation.wrapping_add(1);
        self.generations[slot as usize] = next;
        if next != 0 {
            self.free.push((slot, next));
        }
    }

    /// Frees the slot of a tombstone that is leaving the queue.
    #[inline]
    fn release_tombstone(&mut self, slot: u32, generation: u32) {
        self.cancelled[slot as usize / 64] &= !(1 << (slot % 64));
        let next = generation.wrapping_add(1);
        if next != 0 {
            self.free.push((slot, next));
        }
    }

    /// For sweeps: true for a live entry; frees a tombstone's slot and returns false.
    #[inline]
    fn keep_unless_cancelled(&mut self, slot: u32, generation: u32) -> bool {
        if self.is_cancelled(slot) {
            self.release_tombstone(slot, generation);
            false
        } else {
            true
        }
    }
}

/// The previous implementation, a binary heap with lazy cancellation: the slow and obviously
/// correct model the radix heap must match exactly. Not part of the supported API.
#[doc(hidden)]
pub mod reference;

#[cfg(test)]
mod tests;
