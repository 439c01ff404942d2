//! [`TableLock`]: the lock a node's server workers take around every
//! request on the node's tables (NessieSD's and NessieHY's coupled tables,
//! Pilaf's hash table). Their logic is sans-IO, so the lock is held across
//! the request's rounds: a worker that finds it held waits through the
//! executor ([`Effect::AwaitLock`](crate::machine::Effect::AwaitLock)), and
//! each driver makes it wait its own way (the threaded driver yields until
//! the holder, another thread, releases it; the simulator resumes the
//! waiter when the holder's machine does).

use std::sync::atomic::{AtomicBool, Ordering};

/// One node's table lock (module documentation).
#[derive(Debug, Default)]
pub struct TableLock {
    held: AtomicBool,
}

impl TableLock {
    /// An unheld lock.
    pub fn new() -> TableLock {
        TableLock::default()
    }

    /// Takes the lock if it is free.
    pub fn try_lock(&self) -> Option<TableGuard<'_>> {
        let taken = self
            .held
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        // A guard only when taken: dropping one releases the lock (so no
        // eager `then_some`, which would build and drop one on a miss).
        if taken {
            Some(TableGuard { lock: self })
        } else {
            None
        }
    }

    /// Whether some worker holds it.
    pub fn is_held(&self) -> bool {
        self.held.load(Ordering::Acquire)
    }
}

/// Holds a [`TableLock`]; releases it when dropped (also when the machine
/// holding it is dropped mid-request).
#[derive(Debug)]
pub struct TableGuard<'a> {
    lock: &'a TableLock,
}

impl Drop for TableGuard<'_> {
    fn drop(&mut self) {
        self.lock.held.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{Effect, Machine, Plain, Resolution, Step};
    use nessie_protocol::{Nanos, NodeId};
    use std::sync::Arc;

    #[test]
    fn a_second_worker_waits_for_the_lock_and_gets_it_once_released() {
        let lock = Arc::new(TableLock::new());
        let l = lock.clone();
        let held = lock.try_lock().expect("a new lock is free");
        assert!(lock.try_lock().is_none(), "held once");
        let mut m: Machine<(), Plain> = Machine::new(NodeId(0), 1, move |io| async move {
            let _g = io.lock(&l).await;
            Ok(())
        });
        assert!(matches!(
            m.poll(Nanos(1)),
            Step::Effect(Effect::AwaitLock(_))
        ));
        m.resolve(Resolution::Waited);
        // Still held: it asks again.
        assert!(matches!(
            m.poll(Nanos(2)),
            Step::Effect(Effect::AwaitLock(_))
        ));
        drop(held);
        m.resolve(Resolution::Waited);
        assert!(matches!(m.poll(Nanos(3)), Step::Done(Ok(()))));
        assert!(!lock.is_held(), "the guard released it");
    }
}
