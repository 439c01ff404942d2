//! Device discovery, the device context and its attributes.
//!
//! The context comes from `rdma_get_devices`, so it is the very context
//! `rdma_cm` attaches its ids to: protection domains, completion queues and
//! queue pairs allocated on it can be used with `rdma_create_qp`.

use std::ffi::CStr;
use std::fmt;
use std::sync::Arc;

use rdma_sys::{
    ___ibv_query_port, ibv_atomic_cap, ibv_context, ibv_device_attr, ibv_free_device_list,
    ibv_get_device_list, ibv_get_device_name, ibv_gid, ibv_port_attr, ibv_query_device,
    ibv_query_gid, rdma_free_devices, rdma_get_devices,
};

use crate::error::VerbsError;
use crate::policy::DeviceLimits;

/// The names of the RDMA devices present (`ibv_devices`); empty without any.
pub fn device_names() -> Vec<String> {
    let mut n = 0i32;
    // SAFETY: ibv_get_device_list writes the count to `n` and returns a
    // NULL-terminated array (or NULL on failure, e.g. no kernel support),
    // which is freed below with ibv_free_device_list after copying the names.
    let list = unsafe { ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Vec::new();
    }
    let mut names = Vec::new();
    for i in 0..usize::try_from(n).unwrap_or(0) {
        // SAFETY: `i < n`, so the entry is a valid device pointer.
        let dev = unsafe { *list.add(i) };
        if dev.is_null() {
            break;
        }
        // SAFETY: ibv_get_device_name returns a NUL-terminated string owned
        // by the device, valid until the list is freed; we copy it.
        let name = unsafe { CStr::from_ptr(ibv_get_device_name(dev)) };
        names.push(name.to_string_lossy().into_owned());
    }
    // SAFETY: `list` came from ibv_get_device_list and is freed once.
    unsafe { ibv_free_device_list(list) };
    names
}

/// The atomic capability a device reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicCap {
    /// `IBV_ATOMIC_NONE`: no atomics (the backend refuses to start).
    None,
    /// `IBV_ATOMIC_HCA`: atomic among operations of this NIC (what Nessie needs).
    Hca,
    /// `IBV_ATOMIC_GLOB`: atomic also against the CPU.
    Glob,
    /// A value rdma-core does not define.
    Unknown(u32),
}

impl AtomicCap {
    /// From the `atomic_cap` field of `ibv_device_attr`.
    pub fn from_raw(v: u32) -> AtomicCap {
        match v {
            ibv_atomic_cap::IBV_ATOMIC_NONE => AtomicCap::None,
            ibv_atomic_cap::IBV_ATOMIC_HCA => AtomicCap::Hca,
            ibv_atomic_cap::IBV_ATOMIC_GLOB => AtomicCap::Glob,
            other => AtomicCap::Unknown(other),
        }
    }

    /// Refuses devices that cannot compare-and-swap.
    pub fn require(self, device: &str) -> Result<(), VerbsError> {
        match self {
            AtomicCap::Hca | AtomicCap::Glob => Ok(()),
            AtomicCap::None | AtomicCap::Unknown(_) => Err(VerbsError::NoAtomics {
                device: device.to_string(),
            }),
        }
    }
}

impl fmt::Display for AtomicCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AtomicCap::None => f.write_str("IBV_ATOMIC_NONE"),
            AtomicCap::Hca => f.write_str("IBV_ATOMIC_HCA"),
            AtomicCap::Glob => f.write_str("IBV_ATOMIC_GLOB"),
            AtomicCap::Unknown(v) => write!(f, "unknown atomic capability {v}"),
        }
    }
}

/// What the backend needs to know about a device and port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device name.
    pub name: String,
    /// Firmware version string.
    pub fw_ver: String,
    /// Atomic capability.
    pub atomic: AtomicCap,
    /// Limits used for sizing.
    pub limits: DeviceLimits,
    /// Port link layer (1 InfiniBand, 2 Ethernet/RoCE).
    pub link_layer: u8,
    /// The port's active MTU in bytes (the RDMA path MTU, not the
    /// netdev's: on RoCE the largest of 256..4096 that fits the netdev's).
    pub active_mtu: u32,
}

/// An open device context (owned by librdmacm's device list).
pub struct Context {
    list: *mut *mut ibv_context,
    ctx: *mut ibv_context,
    name: String,
}

// SAFETY: an ibv_context may be used from any thread (libibverbs is
// thread-safe); the list pointer is only freed in Drop.
unsafe impl Send for Context {}
// SAFETY: as above; no method mutates Rust-side state.
unsafe impl Sync for Context {}

impl Context {
    /// Opens the device called `name`, or explains why there is none.
    pub fn open(name: &str) -> Result<Arc<Context>, VerbsError> {
        let names = device_names();
        if names.is_empty() {
            return Err(VerbsError::NoDevice);
        }
        if !names.iter().any(|n| n == name) {
            return Err(VerbsError::DeviceNotFound {
                wanted: name.to_string(),
                available: names,
            });
        }
        let mut n = 0i32;
        // SAFETY: rdma_get_devices returns a NULL-terminated array of open
        // contexts (NULL on failure), released with rdma_free_devices in Drop.
        let list = unsafe { rdma_get_devices(&mut n) };
        if list.is_null() {
            return Err(VerbsError::cm("rdma_get_devices", name));
        }
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: `i < n`: a valid context pointer whose `device` is set.
            let ctx = unsafe { *list.add(i) };
            if ctx.is_null() {
                break;
            }
            // SAFETY: as in device_names; the string is copied.
            let dev_name = unsafe { CStr::from_ptr(ibv_get_device_name((*ctx).device)) }
                .to_string_lossy()
                .into_owned();
            if dev_name == name {
                return Ok(Arc::new(Context {
                    list,
                    ctx,
                    name: dev_name,
                }));
            }
        }
        // SAFETY: `list` came from rdma_get_devices and is freed once.
        unsafe { rdma_free_devices(list) };
        Err(VerbsError::DeviceNotFound {
            wanted: name.to_string(),
            available: names,
        })
    }

    /// The raw context (valid while `self` lives).
    pub fn raw(&self) -> *mut ibv_context {
        self.ctx
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Queries device attributes and checks `port` is active.
    pub fn info(&self, port: u8) -> Result<DeviceInfo, VerbsError> {
        // SAFETY: all-zero is a valid ibv_device_attr (integers and arrays).
        let mut a: ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is an open context and `a` a writable attribute struct.
        let ret = unsafe { ibv_query_device(self.ctx, &mut a) };
        if ret != 0 {
            return Err(VerbsError::verbs_ret("ibv_query_device", ret));
        }
        // SAFETY: all-zero is a valid ibv_port_attr (integers).
        let mut p: ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; the rdma-sys helper passes sizeof(p).
        let ret = unsafe { ___ibv_query_port(self.ctx, port, &mut p) };
        if ret != 0 || port == 0 || i32::from(port) > i32::from(a.phys_port_cnt) {
            return Err(VerbsError::Port {
                device: self.name.clone(),
                port,
                reason: format!("the device has {} port(s)", a.phys_port_cnt),
            });
        }
        // IBV_PORT_ACTIVE = 4.
        if p.state != 4 {
            return Err(VerbsError::Port {
                device: self.name.clone(),
                port,
                reason: format!(
                    "port state {} is not ACTIVE (4); check the link (`ibv_devinfo`)",
                    p.state
                ),
            });
        }
        let fw = a
            .fw_ver
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8 as char)
            .collect();
        let nz = |v: i32| u32::try_from(v).unwrap_or(0);
        Ok(DeviceInfo {
            name: self.name.clone(),
            fw_ver: fw,
            atomic: AtomicCap::from_raw(a.atomic_cap),
            limits: DeviceLimits {
                max_qp_wr: nz(a.max_qp_wr),
                max_cqe: nz(a.max_cqe),
                max_qp_rd_atom: nz(a.max_qp_rd_atom),
                max_qp_init_rd_atom: nz(a.max_qp_init_rd_atom),
                max_msg_sz: p.max_msg_sz,
            },
            link_layer: p.link_layer,
            // IBV_MTU_256 = 1 .. IBV_MTU_4096 = 5.
            active_mtu: 128u32 << (p.active_mtu as u32).clamp(1, 5),
        })
    }

    /// The GID at `index` of `port`.
    pub fn gid(&self, port: u8, index: u8) -> Result<[u8; 16], VerbsError> {
        let mut g = ibv_gid { raw: [0; 16] };
        // SAFETY: ctx is open and `g` is a writable 16-byte GID.
        let ret = unsafe { ibv_query_gid(self.ctx, port, i32::from(index), &mut g) };
        if ret != 0 {
            return Err(VerbsError::Port {
                device: self.name.clone(),
                port,
                reason: format!("GID index {index} cannot be read"),
            });
        }
        // SAFETY: `raw` covers the whole union.
        Ok(unsafe { g.raw })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: `list` came from rdma_get_devices; every object allocated on
        // the context holds an Arc<Context>, so none is left.
        unsafe { rdma_free_devices(self.list) };
    }
}

/// The IPv4 address of a RoCE v2 GID (`::ffff:a.b.c.d`), if it is one.
pub fn gid_ipv4(gid: [u8; 16]) -> Option<std::net::Ipv4Addr> {
    let v6 = std::net::Ipv6Addr::from(gid);
    v6.to_ipv4_mapped()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_caps_are_named_and_none_is_refused() {
        assert_eq!(AtomicCap::from_raw(0), AtomicCap::None);
        assert_eq!(AtomicCap::from_raw(1), AtomicCap::Hca);
        assert_eq!(AtomicCap::from_raw(2), AtomicCap::Glob);
        assert_eq!(AtomicCap::from_raw(9), AtomicCap::Unknown(9));
        assert_eq!(AtomicCap::Hca.to_string(), "IBV_ATOMIC_HCA");
        assert!(AtomicCap::Hca.require("x").is_ok());
        assert!(AtomicCap::Glob.require("x").is_ok());
        let e = AtomicCap::None.require("rxe0").unwrap_err();
        assert!(matches!(e, VerbsError::NoAtomics { .. }));
        assert!(e.to_string().contains("IBV_ATOMIC_NONE"), "{e}");
        assert!(AtomicCap::Unknown(7).require("x").is_err());
    }

    #[test]
    fn roce_v2_gids_carry_the_ipv4_address() {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&[192, 168, 1, 7]);
        assert_eq!(gid_ipv4(g), Some(std::net::Ipv4Addr::new(192, 168, 1, 7)));
        let link_local = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(gid_ipv4(link_local), None);
    }
}
