//! A bound on the open U files of a store: the U files of at most `capacity` deals are
//! open at once; the deal opened longest ago is closed first, and reopened when next
//! used.
//!
//! A node holding 10,000 deals would otherwise keep 30,000 files open (three per deal,
//! `u.rs`), over the usual limit of open files per process (`ulimit -n`, often 1,024 or
//! 20,000), and fail to open its store. The U files of one deal are fixed-size files
//! written in place, so closing and reopening them loses nothing: lengths were checked
//! when the deal was first opened and every write is fsynced before it is acknowledged.
//!
//! A reader holds its handles by `Arc`: a deal closed here while one of its reads or
//! writes runs keeps its files open until that operation drops them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Deals whose U files may be open at once when [`StoreConfig::open_u_deals`] is
/// `None`: 1,024 deals, 3,072 files.
///
/// [`StoreConfig::open_u_deals`]: super::StoreConfig::open_u_deals
pub const DEFAULT_OPEN_U_DEALS: usize = 1024;

/// One deal's open handles (`None` once closed here), shared with [`OpenDeals`].
pub(crate) type Slot<H> = Mutex<Option<Arc<H>>>;

/// The deals whose handles are open, oldest first, at most `capacity` of them.
#[derive(Debug)]
pub(crate) struct OpenDeals<H> {
    capacity: usize,
    open: Mutex<VecDeque<Weak<Slot<H>>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<H> OpenDeals<H> {
    /// At most `capacity` deals open at once (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), open: Mutex::new(VecDeque::new()) }
    }

    /// The handles in `slot`, opened by `open` if they are closed (then registered
    /// here, which may close the oldest other deal's).
    ///
    /// Errors: `open`'s.
    pub(crate) fn get<E>(&self, slot: &Arc<Slot<H>>, open: impl FnOnce() -> Result<H, E>) -> Result<Arc<H>, E> {
        let opened = {
            let mut s = lock(slot);
            if let Some(h) = s.as_ref() {
                return Ok(Arc::clone(h));
            }
            let h = Arc::new(open()?);
            *s = Some(Arc::clone(&h));
            h
        };
        // The slot's lock is released before this one is taken: `register` takes other
        // slots' locks while holding the queue's, never the other way round.
        self.register(slot);
        Ok(opened)
    }

    /// Records `slot` as just opened and closes the oldest deals over the capacity.
    pub(crate) fn register(&self, slot: &Arc<Slot<H>>) {
        let mut open = lock(&self.open);
        open.retain(|w| w.strong_count() > 0);
        open.push_back(Arc::downgrade(slot));
        while open.len() > self.capacity {
            if let Some(oldest) = open.pop_front().and_then(|w| w.upgrade()) {
                lock(&oldest).take();
            }
        }
    }

    /// Deals whose handles are open now (a figure for tests and metrics).
    pub(crate) fn open_count(&self) -> usize {
        lock(&self.open).iter().filter_map(Weak::upgrade).filter(|s| lock(s).is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_capacity_open_and_the_oldest_closed_first() {
        let deals = OpenDeals::<u32>::new(2);
        let slots: Vec<Arc<Slot<u32>>> = (0..3).map(|_| Arc::new(Mutex::new(None))).collect();
        let mut opens = 0;
        for (i, s) in slots.iter().enumerate() {
            let h = deals.get::<()>(s, || { opens += 1; Ok(i as u32) }).unwrap();
            assert_eq!(*h, i as u32);
        }
        assert_eq!(opens, 3);
        assert_eq!(deals.open_count(), 2);
        assert!(lock(&slots[0]).is_none(), "the oldest deal is closed");
        // An open deal is not reopened; a closed one is.
        deals.get::<()>(&slots[2], || { opens += 1; Ok(9) }).unwrap();
        assert_eq!(opens, 3);
        let h = deals.get::<()>(&slots[0], || { opens += 1; Ok(0) }).unwrap();
        assert_eq!((*h, opens), (0, 4));
        assert_eq!(deals.open_count(), 2);
        assert!(lock(&slots[1]).is_none());
    }

    #[test]
    fn a_held_handle_outlives_its_closing_and_dropped_deals_free_their_place() {
        let deals = OpenDeals::<String>::new(1);
        let a: Arc<Slot<String>> = Arc::new(Mutex::new(None));
        let held = deals.get::<()>(&a, || Ok("a".into())).unwrap();
        {
            let b: Arc<Slot<String>> = Arc::new(Mutex::new(None));
            deals.get::<()>(&b, || Ok("b".into())).unwrap();
            assert!(lock(&a).is_none());
        }
        assert_eq!(held.as_str(), "a", "a reader keeps its handle after the deal is closed");
        // b was dropped: a reopens without closing anything live.
        deals.get::<()>(&a, || Ok("a".into())).unwrap();
        assert_eq!(deals.open_count(), 1);
        let err = deals.get::<&str>(&Arc::new(Mutex::new(None)), || Err("no such file"));
        assert_eq!(err.err(), Some("no such file"));
        assert_eq!(deals.open_count(), 1, "a failed open registers nothing");
    }
}
