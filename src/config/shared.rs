//! `Shared<T>`: a module's settings that a configuration level shares with
//! its parent until it changes one of them.
//!
//! Every `server` and `location` starts as a copy of its parent's
//! `LocConf` (`build::inherit`), which is how nginx's inheritance is done
//! without a merge pass. Most levels change a handful of settings, so
//! copying every module's settings (six upstream protocols, TLS, the
//! filters...) for each level made a configuration of 10,000 servers hold
//! about 21 KiB per server. A module's settings behind `Shared` are one
//! reference-counted pointer: cloning a level shares them, and the first
//! write through `DerefMut` (a setter of that module) copies them for that
//! level alone (`Arc::make_mut`). Workers only ever read a `LocConf`
//! (behind an `Arc`), so a request never copies anything.
//!
//! A write that changes nothing still copies; code that resets a field
//! for every level (`build::inherit`) therefore tests it first.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

pub struct Shared<T>(Arc<T>);

impl<T> Shared<T> {
    pub fn new(v: T) -> Shared<T> {
        Shared(Arc::new(v))
    }

    /// Whether two levels still share these settings (tests, diagnostics).
    pub fn ptr_eq(a: &Shared<T>, b: &Shared<T>) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone> DerefMut for Shared<T> {
    fn deref_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

impl<T> From<T> for Shared<T> {
    fn from(v: T) -> Shared<T> {
        Shared::new(v)
    }
}

impl<T: Default> Default for Shared<T> {
    fn default() -> Self {
        Shared::new(T::default())
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}

#[cfg(test)]
mod tests {
    use super::Shared;

    #[test]
    fn clones_share_until_written() {
        let a = Shared::new(vec![1, 2]);
        let mut b = a.clone();
        assert!(Shared::ptr_eq(&a, &b));
        assert_eq!(b.len(), 2);
        b.push(3);
        assert!(!Shared::ptr_eq(&a, &b));
        assert_eq!((&*a, &*b), (&vec![1, 2], &vec![1, 2, 3]));
        // The only holder writes in place.
        let before = &*b as *const Vec<i32>;
        b.push(4);
        assert_eq!(&*b as *const Vec<i32>, before);
    }
}
