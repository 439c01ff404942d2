//! The one concurrency shim of the crate: every `Arc`, mutex, condition
//! variable, atomic and thread yield used by the simulator comes from here.
//!
//! Today the default build maps everything to `std`. Under `cfg(loom)` the
//! same names map to `loom`'s model-checked replacements, so that the
//! simulator (and the protocol running on it) can be explored by loom without
//! touching any other module. The `loom` dependency itself is added by a later
//! change; until then a `--cfg loom` build does not compile, which is expected.
//!
//! A `shuttle` arm will be added the same way: a `#[cfg(shuttle)]` block that
//! re-exports `shuttle::sync::...` and `shuttle::thread::yield_now`, with the
//! `std` arm becoming `#[cfg(not(any(loom, shuttle)))]`.
//!
//! Rule for the rest of the crate: take concurrency primitives only through
//! `crate::sync`, never from `std` directly, and never write `cfg(loom)`
//! anywhere else.

#[cfg(not(loom))]
pub use std::sync::{Arc, Condvar, Mutex, MutexGuard};

#[cfg(loom)]
pub use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Atomic integer and boolean types and memory orderings.
pub mod atomic {
    #[cfg(not(loom))]
    pub use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    #[cfg(loom)]
    pub use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
}

/// Gives up the current thread's time slice (a scheduling point under loom).
pub fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Locks `mutex`, ignoring poisoning: the simulator's mutexes guard no
/// invariant that a panicking holder could leave half-updated.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits on `condvar` with `guard`, ignoring poisoning like [`lock`].
pub fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(|e| e.into_inner())
}
