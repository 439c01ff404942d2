//! The lossy link of the device tests: two RDMA devices on the two ends of
//! a network link whose behaviour a test sets with `tc netem` (loss, delay
//! with jitter, reordering, duplication, a burst that holds packets).
//!
//! The soft-RoCE guest (`tools/softroce/guest-init.sh`) builds one: a veth
//! pair `veth0`/`veth1` with soft-RoCE devices `rxe1`/`rxe2` on it, in one
//! network namespace, with policy routing so that traffic between the two
//! addresses crosses the veth pair (and its netem queues) instead of the
//! loopback interface; it names it in `NESSIE_VERBS_LINK`. The device tests
//! that need a link where packets are lost, late and duplicated (the
//! watchdog's story, `fabric-verbs/tests/lossy_link.rs`; the multi-process
//! stories over it, `cli/tests/cluster.rs`) take it from there. On real
//! hardware the same tests run between two ports joined by a link you may
//! disturb (never a shared one).

use std::net::IpAddr;
use std::process::Command;

/// One end of the link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkEnd {
    /// The RDMA device on it (`rxe1`).
    pub device: String,
    /// Its IP address.
    pub addr: IpAddr,
    /// The network interface whose queue netem shapes (`veth0`).
    pub netdev: String,
}

/// The two ends, and the queues a test shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LossyLink {
    /// The two ends.
    pub ends: [LinkEnd; 2],
}

/// Why `NESSIE_VERBS_LINK` cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkError {
    /// Not set.
    #[error("NESSIE_VERBS_LINK is not set: these device tests need two RDMA devices joined by a link they may disturb with tc netem (tools/softroce/run.sh builds one in its guest): \"rxe1,198.51.100.1,veth0 rxe2,198.51.100.2,veth1\"")]
    Unset,
    /// Not two `device,address,netdev` ends.
    #[error(
        "NESSIE_VERBS_LINK = {0:?}: want two ends \"device,address,netdev\" separated by a space"
    )]
    Malformed(String),
}

impl LossyLink {
    /// Parses `device,address,netdev device,address,netdev`.
    pub fn parse(text: &str) -> Result<LossyLink, LinkError> {
        let bad = || LinkError::Malformed(text.to_string());
        let ends: Vec<LinkEnd> = text
            .split_whitespace()
            .map(|end| {
                let f: Vec<&str> = end.split(',').collect();
                match f.as_slice() {
                    [device, addr, netdev] if !device.is_empty() && !netdev.is_empty() => {
                        Ok(LinkEnd {
                            device: device.to_string(),
                            addr: addr.parse().map_err(|_| bad())?,
                            netdev: netdev.to_string(),
                        })
                    }
                    _ => Err(bad()),
                }
            })
            .collect::<Result<_, _>>()?;
        let ends: [LinkEnd; 2] = ends.try_into().map_err(|_| bad())?;
        Ok(LossyLink { ends })
    }

    /// The link `NESSIE_VERBS_LINK` names.
    pub fn from_env() -> Result<LossyLink, LinkError> {
        match std::env::var("NESSIE_VERBS_LINK") {
            Ok(v) if !v.trim().is_empty() => LossyLink::parse(&v),
            _ => Err(LinkError::Unset),
        }
    }

    /// Shapes both directions with `netem` and these arguments (e.g.
    /// `delay 2ms 1ms loss 1% reorder 5% duplicate 1%`), replacing what
    /// was there (`tc qdisc change` would keep options not given again).
    pub fn set(&self, netem: &str) -> Result<(), String> {
        for end in &self.ends {
            let _ = tc(&["qdisc", "del", "dev", &end.netdev, "root"]);
            let mut args = vec!["qdisc", "add", "dev", &end.netdev, "root", "netem"];
            args.extend(netem.split_whitespace());
            tc(&args)?;
        }
        Ok(())
    }

    /// Removes the shaping: a clean link.
    pub fn clear(&self) {
        for end in &self.ends {
            let _ = tc(&["qdisc", "del", "dev", &end.netdev, "root"]);
        }
    }

    /// What the two queues did (`tc -s qdisc show`), for the test's output.
    pub fn stats(&self) -> String {
        self.ends
            .iter()
            .map(|e| {
                tc(&["-s", "qdisc", "show", "dev", &e.netdev])
                    .unwrap_or_else(|e| e)
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

/// Runs iproute2's `tc` (by its full path where it is there: a busybox
/// applet of the same name may come first on the PATH).
fn tc(args: &[&str]) -> Result<String, String> {
    let bin = if std::path::Path::new("/usr/sbin/tc").exists() {
        "/usr/sbin/tc"
    } else {
        "tc"
    };
    let out = Command::new(bin)
        .args(args)
        .output()
        .map_err(|e| format!("running {bin}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{bin} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_is_two_ends_of_device_address_and_interface() {
        let l = LossyLink::parse("rxe1,198.51.100.1,veth0  rxe2,198.51.100.2,veth1").unwrap();
        assert_eq!(l.ends[0].device, "rxe1");
        assert_eq!(l.ends[1].addr, "198.51.100.2".parse::<IpAddr>().unwrap());
        assert_eq!(l.ends[1].netdev, "veth1");
        for bad in [
            "",
            "rxe1,198.51.100.1,veth0",
            "rxe1,198.51.100.1,veth0 rxe2,nowhere,veth1",
            "rxe1,198.51.100.1 rxe2,198.51.100.2,veth1",
            "a,1.1.1.1,b c,2.2.2.2,d e,3.3.3.3,f",
        ] {
            assert!(
                matches!(LossyLink::parse(bad), Err(LinkError::Malformed(_))),
                "{bad:?}"
            );
        }
    }
}
