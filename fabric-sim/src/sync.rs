//! The one concurrency shim of the crate: every `Arc`, mutex, condition
//! variable, atomic and thread yield used by the simulator comes from here.
//!
//! The default build maps everything to `std`. Under `cfg(loom)`
//! (`RUSTFLAGS="--cfg loom"`, see `fabric-sim/tests/loom.rs`) the same names map
//! to `loom`'s model-checked replacements, so that the simulator (and the
//! protocol running on it) can be explored by loom without touching any other
//! module.
//!
//! Shuttle needs no arm here: shuttle tests run the `std` build and make every
//! word the simulated NIC moves a scheduling point through
//! [`SimConfig::schedule_point`](crate::SimConfig::schedule_point). (Swapping
//! shuttle's primitives in by a cargo feature would unify into every other test
//! of a `cargo test` run, where shuttle's primitives cannot be used.)
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
