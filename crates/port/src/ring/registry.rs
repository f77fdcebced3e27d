//! Ring ends found by name, for configs and the CLI (`ring:NAME`).
//!
//! The first open of a name makes a [`pair`](super::pair) and returns end A; the registry keeps
//! end B until the second open of that name takes it; a third open is an error (a ring has two
//! ends). The registry holds no end once both are taken, so dropping the ends frees the ring.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use packet::Pool;

use super::{pair, RingPort, MAX_CAPACITY};
use crate::PortError;

enum Entry {
    /// End A was handed out; end B waits for the second open.
    WaitingForB { b: Arc<RingPort>, capacity: usize },
    /// Both ends were handed out.
    BothTaken,
}

/// Named ring ends. Control path only (it takes a lock).
#[derive(Default)]
pub struct Registry {
    entries: Mutex<HashMap<String, Entry>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.entries.lock().map(|e| e.len()).unwrap_or(0);
        f.debug_struct("Registry").field("names", &n).finish()
    }
}

impl Registry {
    /// An empty registry (tests and embedders that want their own namespace).
    pub fn new() -> Registry {
        Registry::default()
    }

    /// The process-wide registry used by [`open_named`] and port specs.
    pub fn global() -> &'static Registry {
        static GLOBAL: OnceLock<Registry> = OnceLock::new();
        GLOBAL.get_or_init(Registry::new)
    }

    /// Opens an end of ring `name`: end A on the first call, end B on the second, an error
    /// after that. `capacity` must be a power of two in `1..=`[`MAX_CAPACITY`], and the same
    /// for both opens.
    pub fn open(
        &self,
        name: &str,
        capacity: usize,
        pool: &Pool,
    ) -> Result<Arc<RingPort>, PortError> {
        if name.is_empty() {
            return Err(PortError::new(
                "ring:",
                "a ring needs a name, e.g. ring:uplink",
            ));
        }
        if !capacity.is_power_of_two() || capacity > MAX_CAPACITY {
            return Err(PortError::new(
                name,
                format!(
                    "ring capacity {capacity} is not a power of two between 1 and \
                     {MAX_CAPACITY}; use e.g. 1024"
                ),
            ));
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.remove(name) {
            None => {
                let (a, b) = pair(&format!("{name}.a"), &format!("{name}.b"), capacity, pool);
                entries.insert(name.to_string(), Entry::WaitingForB { b, capacity });
                Ok(a)
            }
            Some(Entry::WaitingForB { b, capacity: first }) if first == capacity => {
                entries.insert(name.to_string(), Entry::BothTaken);
                Ok(b)
            }
            Some(Entry::WaitingForB { b, capacity: first }) => {
                let err = PortError::new(
                    name,
                    format!(
                        "ring was first opened with capacity {first}, now with {capacity}; \
                         give both ends the same capacity"
                    ),
                );
                entries.insert(name.to_string(), Entry::WaitingForB { b, capacity: first });
                Err(err)
            }
            Some(Entry::BothTaken) => {
                entries.insert(name.to_string(), Entry::BothTaken);
                Err(PortError::new(
                    name,
                    "both ends of this ring are already open (a ring has two ends); \
                     use another ring name",
                ))
            }
        }
    }

    /// Forgets `name`, so it can be opened anew (a waiting end B is dropped). Returns whether
    /// the name was known.
    pub fn forget(&self, name: &str) -> bool {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(name).is_some()
    }
}

/// Opens an end of ring `name` in the process-wide [`Registry`]: end A first, then end B,
/// then an error.
pub fn open_named(name: &str, capacity: usize, pool: &Pool) -> Result<Arc<RingPort>, PortError> {
    Registry::global().open(name, capacity, pool)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Port;
    use packet::Batch;

    #[test]
    fn first_open_is_a_second_is_b_third_fails() {
        let pool = Pool::with_frames(16);
        let reg = Registry::new();
        let a = reg.open("x", 8, &pool).unwrap();
        let b = reg.open("x", 8, &pool).unwrap();
        assert_eq!(a.name(), "x.a");
        assert_eq!(b.name(), "x.b");
        let err = reg.open("x", 8, &pool).unwrap_err();
        assert!(err.to_string().contains("both ends"), "{err}");

        let mut cache = pool.cache();
        let mut batch = Batch::new();
        batch.push(cache.alloc_from(b"hi").unwrap()).unwrap();
        assert_eq!(a.open_tx(0).unwrap().send(&mut batch), 1);
        assert_eq!(b.open_rx(0).unwrap().recv(&mut batch), 1);
        batch.free_into(&mut cache);

        assert!(reg.forget("x"));
        assert_eq!(reg.open("x", 8, &pool).unwrap().name(), "x.a");
    }

    #[test]
    fn bad_capacity_and_mismatch_are_explained() {
        let pool = Pool::with_frames(16);
        let reg = Registry::new();
        let err = reg.open("y", 100, &pool).unwrap_err();
        assert!(err.to_string().contains("not a power of two"), "{err}");
        let _a = reg.open("y", 8, &pool).unwrap();
        let err = reg.open("y", 16, &pool).unwrap_err();
        assert!(err.to_string().contains("same capacity"), "{err}");
        assert!(reg.open("y", 8, &pool).is_ok());
        assert!(reg.open("", 8, &pool).is_err());
    }

    #[test]
    fn global_registry_hands_out_two_ends() {
        let pool = Pool::with_frames(16);
        let a = open_named("registry-test-global", 4, &pool).unwrap();
        let b = open_named("registry-test-global", 4, &pool).unwrap();
        assert_ne!(a.name(), b.name());
        assert!(open_named("registry-test-global", 4, &pool).is_err());
    }
}
