//! Why an endpoint refused a request before posting it
//! ([`TransportError::Endpoint`](crate::TransportError::Endpoint)), and the
//! backend's own error carried whole when the refusal is the backend's.
//!
//! Every refusal here means the same for the request: **nothing of it was
//! posted**, so it did not and will not take effect. The variants say why, so
//! that a caller can tell a connection that is not up from a full queue or a
//! failed device call without reading text.

use std::error::Error as StdError;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::addr::NodeId;

/// Why an endpoint refused a request: nothing of it was posted.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointRefusal {
    /// No connection to the node is up (never made, or torn down).
    #[error("no connection to {0}")]
    NoConnection(NodeId),
    /// The send queue to the node had no room for the request.
    #[error("the send queue to {0} is full")]
    SendQueueFull(NodeId),
    /// A CPU access to the own node's data region from a process that hosts
    /// no node (a client without storage has no local region).
    #[error("a client in a process hosting no node has no data region to read or write by CPU")]
    NoLocalRegion,
    /// A memory window index past the windows a node allocates.
    #[error("{node}: window {index} is past the {max} a node allocates")]
    WindowIndex {
        /// The node whose window was named.
        node: NodeId,
        /// The index asked for.
        index: u32,
        /// How many windows a node allocates.
        max: u32,
    },
    /// A device call that posts requests failed with an error number.
    #[error("{call} to {node} failed: {}", std::io::Error::from_raw_os_error(*errno))]
    Call {
        /// The device call (`ibv_post_send`, ...).
        call: &'static str,
        /// The node the request was for.
        node: NodeId,
        /// The error number it returned.
        errno: i32,
    },
    /// The backend's own error (a connection it could not make, a window it
    /// could not allocate): its type is the backend's, reached with
    /// [`BackendError::downcast_ref`].
    #[error(transparent)]
    Backend(BackendError),
}

/// A backend's own error, carried whole: [`BackendError::downcast_ref`]
/// returns it as the backend's type, and [`source`](StdError::source) walks
/// its causes.
///
/// Cheap to clone (shared). Two are equal, and hash alike, when they are the
/// same error (one was cloned from the other), not when their texts match.
#[derive(Clone)]
pub struct BackendError(Arc<dyn StdError + Send + Sync + 'static>);

impl BackendError {
    /// Carries `error`.
    pub fn new<E: StdError + Send + Sync + 'static>(error: E) -> BackendError {
        BackendError(Arc::new(error))
    }

    /// The carried error as an `E`, if it is one.
    pub fn downcast_ref<E: StdError + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref::<E>()
    }

    /// The carried error.
    pub fn get_ref(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.0
    }

    fn addr(&self) -> *const () {
        Arc::as_ptr(&self.0) as *const ()
    }
}

impl fmt::Debug for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl StdError for BackendError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}

impl PartialEq for BackendError {
    fn eq(&self, other: &BackendError) -> bool {
        std::ptr::eq(self.addr(), other.addr())
    }
}

impl Eq for BackendError {}

impl Hash for BackendError {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.addr().hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the backend's words")]
    struct Words;

    #[test]
    fn a_backend_error_keeps_its_type_and_identity() {
        let e = BackendError::new(Words);
        assert!(e.downcast_ref::<Words>().is_some());
        assert!(e.downcast_ref::<std::io::Error>().is_none());
        assert_eq!(e.to_string(), "the backend's words");
        assert_eq!(e.clone(), e);
        assert_ne!(
            BackendError::new(Words),
            e,
            "equal only when it is one error"
        );
    }

    #[test]
    fn a_failed_call_names_its_errno() {
        let r = EndpointRefusal::Call {
            call: "ibv_post_send",
            node: NodeId(2),
            errno: 12,
        };
        let text = r.to_string();
        assert!(
            text.starts_with("ibv_post_send to node2 failed: "),
            "{text}"
        );
    }
}
