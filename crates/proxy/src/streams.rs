//! Upstream stream ids. The proxy owns the ids it uses toward the server: each client request
//! (and each request the proxy makes itself) takes a free id from a bitmap, and the response's
//! id finds the request again. When every id is taken, callers wait (backpressure). What an id
//! is pending for is the session's affair (`P`; see `session::pending`).
//!
//! Beside each id the table keeps a [`Tag`] for the admin statistics: when the request took
//! the id and the statement shape it runs.

use crate::shapes::ShapeRef;
use crate::stamp::Stamp;

/// Stream ids 0..=32767 are the client's side of the protocol (negative ids are the server's).
pub const STREAM_COUNT: usize = 32768;

/// What the admin statistics need about a request in flight.
#[derive(Debug, Clone, Default)]
pub struct Tag {
    /// When the request took its id. Kept across a replay under the same id
    /// ([`StreamTable::allocate_exact`]), so a replayed request counts from its first send.
    pub started: Option<Stamp>,
    /// The statement shape of a normalized QUERY.
    pub shape: Option<ShapeRef>,
    /// Whether its response time is one of the control comparison's (see [`crate::control`]).
    pub group: crate::control::Group,
}

/// A bitmap allocator with the pending request of every id in use.
///
/// The table grows with the ids in use, 64 at a time, and is given back whole when nothing is
/// in flight and it had grown past [`KEEP_IDS`]: an idle connection holds a few hundred bytes
/// of it, not the 32,768 slots the protocol allows. The lowest free id is handed out, so a
/// connection with n requests in flight uses ids below about n.
#[derive(Debug)]
pub struct StreamTable<P> {
    /// Most ids handed out (the configured `upstream_streams`, at most 32,768).
    capacity: usize,
    /// One bit per id of the grown part, set when free.
    free_bits: Vec<u64>,
    /// Indexed by id; as long as the grown part.
    slots: Vec<Option<P>>,
    /// Indexed by id like `slots`, grown only as far as the highest id used.
    tags: Vec<Tag>,
    in_use: usize,
}

/// A table grown past this many ids is given back when nothing is in flight.
pub const KEEP_IDS: usize = 256;

impl<P> Default for StreamTable<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P> StreamTable<P> {
    /// An empty table: every id free.
    pub fn new() -> Self {
        Self::with_capacity(STREAM_COUNT)
    }

    /// A table handing out only ids `0..capacity` (at most 32768; at least 1).
    pub fn with_capacity(capacity: usize) -> Self {
        StreamTable {
            capacity: capacity.clamp(1, STREAM_COUNT),
            free_bits: Vec::new(),
            slots: Vec::new(),
            tags: Vec::new(),
            in_use: 0,
        }
    }

    /// A table that hands out no id: that of a connection whose upstream socket is gone (its
    /// requests in flight were taken with [`StreamTable::into_pending`]). Every allocation
    /// fails as when all ids are in use, so the senders' common path needs no check of its
    /// own; the slow path, which would wait for an id, asks [`StreamTable::is_closed`].
    pub fn closed() -> Self {
        StreamTable {
            capacity: 0,
            free_bits: Vec::new(),
            slots: Vec::new(),
            tags: Vec::new(),
            in_use: 0,
        }
    }

    /// Whether this is a [`StreamTable::closed`] table.
    pub fn is_closed(&self) -> bool {
        self.capacity == 0
    }

    /// Takes a free id for `pending`, or `None` when all are in use.
    pub fn allocate(&mut self, pending: P) -> Option<i16> {
        self.allocate_tagged(pending, None, crate::control::Group::Other)
            .ok()
    }

    /// The lowest free id, growing the table by one word of 64 ids when every grown id is
    /// taken.
    fn take_free_id(&mut self) -> Option<(usize, i16)> {
        if self.in_use >= self.capacity {
            return None;
        }
        let w = match self.free_bits.iter().position(|&word| word != 0) {
            Some(w) => w,
            None => self.grow()?,
        };
        let word = self.free_bits[w];
        let bit = word.trailing_zeros() as usize;
        let idx = w * 64 + bit;
        // idx < 32768, so it fits in i16.
        let id = i16::try_from(idx).ok()?;
        self.free_bits[w] &= !(1u64 << bit);
        self.in_use += 1;
        Some((idx, id))
    }

    /// Adds a word of free ids (fewer in the last word of a capacity that is not a multiple
    /// of 64); its index, or `None` at capacity.
    fn grow(&mut self) -> Option<usize> {
        let first = self.free_bits.len() * 64;
        if first >= self.capacity {
            return None;
        }
        let n = (self.capacity - first).min(64);
        self.free_bits
            .push(if n == 64 { u64::MAX } else { (1u64 << n) - 1 });
        self.slots.resize_with(first + 64, || None);
        Some(self.free_bits.len() - 1)
    }

    /// Gives the grown table back once nothing is in flight, if it had grown large. Called by
    /// the session when it has handled every response read so far (not on each release: a
    /// replay takes the released id again right away and keeps its tag).
    pub fn shrink_if_idle(&mut self) {
        if self.in_use == 0 && self.slots.len() > KEEP_IDS {
            *self = StreamTable::with_capacity(self.capacity);
        }
    }

    /// Memory the table holds (its vectors' capacities), for the footprint tests.
    pub fn heap_bytes(&self) -> usize {
        self.free_bits.capacity() * 8
            + self.slots.capacity() * std::mem::size_of::<Option<P>>()
            + self.tags.capacity() * std::mem::size_of::<Tag>()
    }

    /// Like [`StreamTable::allocate`], and tags the request with its statement shape. When all
    /// ids are in use, hands both back.
    pub fn allocate_tagged(
        &mut self,
        pending: P,
        shape: Option<ShapeRef>,
        group: crate::control::Group,
    ) -> Result<i16, (P, Option<ShapeRef>)> {
        self.allocate_at(pending, shape, group, Stamp::now())
    }

    /// [`StreamTable::allocate_tagged`] for a request that counts as started at `started` (a
    /// reader reads the clock once for every request one read brought).
    pub fn allocate_at(
        &mut self,
        pending: P,
        shape: Option<ShapeRef>,
        group: crate::control::Group,
        started: Stamp,
    ) -> Result<i16, (P, Option<ShapeRef>)> {
        let Some((idx, id)) = self.take_free_id() else {
            return Err((pending, shape));
        };
        self.slots[idx] = Some(pending);
        if self.tags.len() <= idx {
            self.tags.resize_with(idx + 1, Tag::default);
        }
        self.tags[idx] = Tag {
            started: Some(started),
            shape,
            group,
        };
        Ok(id)
    }

    /// Releases `id` like [`StreamTable::release`], also returning its tag. The start time
    /// stays behind for a replay under the same id; the shape goes with the tag.
    // Inlined: it is most of what an answer passed through costs (see `scripts/hop-icount.sh`).
    #[inline]
    pub fn release_tagged(&mut self, id: i16) -> (Option<P>, Tag) {
        let pending = self.release(id);
        let tag = match (
            &pending,
            usize::try_from(id).ok().and_then(|i| self.tags.get_mut(i)),
        ) {
            (Some(_), Some(t)) => Tag {
                started: t.started,
                shape: t.shape.take(),
                group: t.group,
            },
            _ => Tag::default(),
        };
        (pending, tag)
    }

    /// Releases `id` like [`StreamTable::release_tagged`] only if `take` accepts what it is
    /// pending for, returning what `take` makes of it; otherwise the id stays as it was.
    pub fn release_if<T>(
        &mut self,
        id: i16,
        take: impl FnOnce(&P) -> Option<T>,
    ) -> Option<(T, Tag)> {
        let idx = usize::try_from(id).ok()?;
        let taken = take(self.slots.get(idx)?.as_ref()?)?;
        let (_, tag) = self.release_tagged(id);
        Some((taken, tag))
    }

    /// Releases `id`, returning what it was used for (`None` for an id not in use).
    pub fn release(&mut self, id: i16) -> Option<P> {
        let idx = usize::try_from(id).ok()?;
        let pending = self.slots.get_mut(idx)?.take()?;
        self.free_bits[idx / 64] |= 1u64 << (idx % 64);
        self.in_use -= 1;
        Some(pending)
    }

    /// Replaces what an id in use is pending for, keeping the id (a replay under the same id).
    pub fn replace(&mut self, id: i16, pending: P) -> bool {
        match usize::try_from(id).ok().and_then(|i| self.slots.get_mut(i)) {
            Some(slot @ Some(_)) => {
                *slot = Some(pending);
                true
            }
            _ => false,
        }
    }

    /// Puts `pending` on `id` whether or not it is in use (a replay under the id whose
    /// response just arrived and was released).
    pub fn allocate_exact(&mut self, id: i16, pending: P) {
        let Some(idx) = usize::try_from(id).ok().filter(|i| *i < self.capacity) else {
            return;
        };
        while self.slots.len() <= idx {
            if self.grow().is_none() {
                return;
            }
        }
        if self.slots[idx].is_none() {
            self.free_bits[idx / 64] &= !(1u64 << (idx % 64));
            self.in_use += 1;
        }
        self.slots[idx] = Some(pending);
    }

    /// Every request still in flight (the connection is ending).
    pub fn in_flight(&self) -> impl Iterator<Item = &P> {
        self.slots.iter().flatten()
    }

    /// How many ids are in use.
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    /// Every request in flight, taken out of the table (its connection is gone).
    pub fn into_pending(self) -> impl Iterator<Item = P> {
        self.slots.into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A pending entry of the tests: the client's stream id.
    fn p(stream: i16) -> i16 {
        stream
    }

    #[test]
    fn exhausts_then_recovers() {
        let mut t = StreamTable::<i16>::new();
        let mut ids = std::collections::HashSet::new();
        for i in 0..STREAM_COUNT {
            let id = t.allocate(p(i as i16)).unwrap();
            assert!(id >= 0);
            assert!(ids.insert(id));
        }
        assert_eq!(t.allocate(p(0)), None);
        assert_eq!(t.release(77), Some(p(77)));
        assert_eq!(t.release(77), None);
        assert_eq!(t.allocate(p(5)), Some(77));
        assert_eq!(t.release(-1), None);
    }

    #[test]
    fn a_closed_table_hands_out_nothing_and_gives_its_requests_back() {
        let mut t = StreamTable::<i16>::with_capacity(8);
        let a = t.allocate(p(3)).unwrap();
        t.allocate(p(4)).unwrap();
        t.release(a);
        let mut left: Vec<i16> = std::mem::replace(&mut t, StreamTable::closed())
            .into_pending()
            .collect();
        left.sort();
        assert_eq!(left, [4]);
        assert!(t.is_closed() && !StreamTable::<i16>::new().is_closed());
        assert_eq!(t.allocate(p(5)), None);
        // A replay under a given id takes nothing either.
        t.allocate_exact(0, p(6));
        assert_eq!(t.in_use(), 0);
        assert_eq!(t.in_flight().count(), 0);
    }

    #[test]
    fn release_if_releases_only_what_it_accepts() {
        let mut t = StreamTable::<i16>::new();
        let a = t.allocate(p(4)).unwrap();
        let b = t.allocate(p(-4)).unwrap();
        let positive = |s: &i16| (*s >= 0).then_some(*s);
        let (taken, tag) = t.release_if(a, positive).unwrap();
        assert_eq!(taken, 4);
        assert!(tag.started.is_some());
        assert!(t.release_if(b, positive).is_none());
        assert!(t.release_if(a, positive).is_none(), "released once");
        assert_eq!(t.in_use(), 1);
        assert_eq!(t.release(b), Some(p(-4)), "a refused id stays in use");
    }

    #[test]
    fn small_tables_hand_out_only_their_ids() {
        let mut t = StreamTable::<i16>::with_capacity(3);
        let ids: Vec<_> = (0..3).map(|i| t.allocate(p(i)).unwrap()).collect();
        assert_eq!(ids, vec![0, 1, 2]);
        assert_eq!(t.allocate(p(9)), None);
        assert_eq!(t.release(3), None);
        t.release(1);
        assert_eq!(t.allocate(p(9)), Some(1));
    }

    #[test]
    fn tags_follow_the_request_and_survive_a_replay() {
        let shapes = crate::shapes::Shapes::new(4);
        let shape = shapes.enter(
            autoprep_cache::ShapeHash(1),
            None,
            "SELECT * FROM t WHERE k = ?",
        );
        let mut t = StreamTable::<i16>::new();
        let id = t
            .allocate_tagged(p(3), Some(shape), crate::control::Group::Other)
            .unwrap();
        let (pending, tag) = t.release_tagged(id);
        assert_eq!(pending, Some(p(3)));
        let started = tag.started.unwrap();
        assert!(tag.shape.is_some());
        // A replay under the same id keeps the first start time.
        t.allocate_exact(id, p(3));
        let (_, again) = t.release_tagged(id);
        assert_eq!(again.started, Some(started));
        assert!(again.shape.is_none());
        // An id not in use has no tag.
        let (none, tag) = t.release_tagged(id);
        assert!(none.is_none() && tag.started.is_none());
        // A plain allocation is timed but has no shape.
        let id = t.allocate(p(4)).unwrap();
        let (_, tag) = t.release_tagged(id);
        assert!(tag.started.is_some() && tag.shape.is_none());
    }

    #[test]
    fn grows_with_use_and_is_given_back_when_idle() {
        let mut t = StreamTable::<i16>::new();
        assert_eq!(t.heap_bytes(), 0);
        let ids: Vec<i16> = (0..1000).map(|i| t.allocate(p(i)).unwrap()).collect();
        assert_eq!(ids, (0..1000).collect::<Vec<i16>>());
        let grown = t.heap_bytes();
        assert!(grown > 0);
        for id in ids {
            t.release(id);
        }
        assert_eq!(t.heap_bytes(), grown, "kept until the session says");
        t.shrink_if_idle();
        assert_eq!(t.heap_bytes(), 0);
        // A small table is kept: it is what an ordinary connection needs.
        let a = t.allocate(p(1)).unwrap();
        t.release(a);
        t.shrink_if_idle();
        assert!(
            t.heap_bytes() > 0 && t.heap_bytes() < 8 * 1024,
            "{}",
            t.heap_bytes()
        );
        // A replay under an id beyond the grown part grows it.
        t.allocate_exact(700, p(2));
        assert_eq!(t.release(700), Some(p(2)));
    }

    #[test]
    fn tagged_allocation_hands_back_when_full() {
        let mut t = StreamTable::<i16>::new();
        for i in 0..STREAM_COUNT {
            t.allocate(p(i as i16)).unwrap();
        }
        let back = t
            .allocate_tagged(p(9), None, crate::control::Group::Other)
            .unwrap_err();
        assert_eq!(back.0, p(9));
    }

    proptest! {
        /// Against a model: ids handed out are unique among those in use, and release returns
        /// exactly what was stored.
        #[test]
        fn matches_a_model(ops in proptest::collection::vec(any::<(bool, u16)>(), 0..2000)) {
            let mut t = StreamTable::<i16>::new();
            let mut model = std::collections::HashMap::new();
            for (alloc, x) in ops {
                if alloc {
                    let id = t.allocate(p(x as i16)).unwrap();
                    prop_assert!(model.insert(id, x as i16).is_none());
                } else {
                    let id = (x % 64) as i16;
                    let expect = model.remove(&id).map(p);
                    prop_assert_eq!(t.release(id), expect);
                }
                prop_assert_eq!(t.in_use(), model.len());
            }
        }
    }
}
