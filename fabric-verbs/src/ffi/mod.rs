//! Safe wrappers over the libibverbs and librdmacm objects the backend uses.
//!
//! Each wrapper owns one object and releases it in `Drop`; the objects it
//! depends on are held by `Arc`, so the release order is enforced by
//! reference counts: queue pairs (and their `rdma_cm` ids) before memory
//! registrations and completion queues, those before the protection domain,
//! the protection domain before the device context.
//!
//! libibverbs and librdmacm objects are thread-safe (rdma-core documents
//! verbs calls as callable from any thread), which is what the `Send`/`Sync`
//! implementations rely on.

pub mod cm;
pub mod cq;
pub mod device;
pub mod memory;
pub mod window;
