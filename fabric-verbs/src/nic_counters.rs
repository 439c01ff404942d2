//! The NIC's own counters (issue 26, item 6): what the device saw on the
//! wire, read from sysfs, so that a run's report shows retransmissions,
//! duplicates, sequence errors and timeouts next to the protocol's own
//! counts.
//!
//! Linux exposes them per port under
//! `/sys/class/infiniband/<device>/ports/<port>/`: `counters/` (the
//! InfiniBand port counters: `port_xmit_data`, `port_rcv_packets`, ...)
//! and `hw_counters/` (the driver's: soft-RoCE's `duplicate_request`,
//! `out_of_seq_request`, `retry_exceeded_err`, `rcvd_seq_err`, ...;
//! ConnectX's `local_ack_timeout_err`, `out_of_sequence`,
//! `packet_seq_err`, `implied_nak_seq_err`, ...). Every readable file that
//! holds one number is taken, under its file name (the `hw_counters` ones
//! prefixed `hw.`). A device without them reads as no counters.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Counters whose growth means the transport had trouble (retransmissions,
/// duplicates, out-of-order or lost packets, timeouts), printed first.
const TROUBLE: [&str; 12] = [
    "duplicate_request",
    "out_of_seq_request",
    "out_of_sequence",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "retry_exceeded_err",
    "retry_rnr_exceeded_err",
    "completer_retry_err",
    "rcvd_seq_err",
    "rnr_nak_retry_err",
    "link_downed",
];

/// A snapshot of one port's counters, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NicCounters(BTreeMap<String, u64>);

impl NicCounters {
    /// Reads port `port` of `device` from `/sys/class/infiniband`.
    pub fn read(device: &str, port: u8) -> io::Result<NicCounters> {
        NicCounters::read_from(Path::new("/sys/class/infiniband"), device, port)
    }

    /// Reads port `port` of `device` under `root` (a sysfs tree, or a copy
    /// of one).
    pub fn read_from(root: &Path, device: &str, port: u8) -> io::Result<NicCounters> {
        let port_dir: PathBuf = root.join(device).join("ports").join(port.to_string());
        if !port_dir.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no port {port} of {device} under {}", root.display()),
            ));
        }
        let mut out = BTreeMap::new();
        for (sub, prefix) in [("counters", ""), ("hw_counters", "hw.")] {
            let Ok(entries) = std::fs::read_dir(port_dir.join(sub)) else {
                continue;
            };
            for e in entries.flatten() {
                let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                // Some counters are write-only or fail to read on some
                // drivers: skipped, not an error.
                let Ok(text) = std::fs::read_to_string(e.path()) else {
                    continue;
                };
                if let Ok(v) = text.trim().parse::<u64>() {
                    out.insert(format!("{prefix}{name}"), v);
                }
            }
        }
        Ok(NicCounters(out))
    }

    /// The counter `name` (`hw.` prefixed for the driver's), if read.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.0.get(name).copied()
    }

    /// How much each counter grew since `earlier` (a counter reset or
    /// wrapped meanwhile counts from zero; one `earlier` lacks is taken
    /// whole).
    pub fn since(&self, earlier: &NicCounters) -> NicCounters {
        NicCounters(
            self.0
                .iter()
                .map(|(k, &v)| {
                    let before = earlier.0.get(k).copied().unwrap_or(0);
                    (k.clone(), v.checked_sub(before).unwrap_or(v))
                })
                .collect(),
        )
    }

    /// Every counter read, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(k, &v)| (k.as_str(), v))
    }

    /// The flow-control counters of Ethernet port `netdev` (the RoCE
    /// device's), as `ethtool -S` prints them: pause frames and their
    /// duration per priority, pause storms, PFC, ECN marks and congestion
    /// notifications, discards (`is_flow_control`). They show how long
    /// pauses hold packets on a PFC fabric, against what the settings
    /// tolerate (docs/deploy.md, "PFC fabrics"). An error if `ethtool`
    /// is missing or the driver gives no statistics.
    pub fn read_ethtool(netdev: &str) -> io::Result<NicCounters> {
        let out = std::process::Command::new("ethtool")
            .args(["-S", netdev])
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "ethtool -S {netdev}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(NicCounters::parse_ethtool(&String::from_utf8_lossy(
            &out.stdout,
        )))
    }

    /// The flow-control counters of `ethtool -S`'s output (`name: value`
    /// lines; the others are left out).
    pub fn parse_ethtool(text: &str) -> NicCounters {
        NicCounters(
            text.lines()
                .filter_map(|l| {
                    let (k, v) = l.trim().split_once(':')?;
                    let (k, v) = (k.trim(), v.trim().parse::<u64>().ok()?);
                    is_flow_control(k).then(|| (k.to_string(), v))
                })
                .collect(),
        )
    }

    /// Whether no counter was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The counters that are not zero, the transport-trouble ones first.
    pub fn nonzero(&self) -> Vec<(&str, u64)> {
        let trouble = |k: &str| TROUBLE.contains(&k.trim_start_matches("hw."));
        let mut v: Vec<(&str, u64)> = self
            .0
            .iter()
            .filter(|(_, &v)| v != 0)
            .map(|(k, &v)| (k.as_str(), v))
            .collect();
        v.sort_by_key(|(k, _)| !trouble(k));
        v
    }
}

/// Whether an `ethtool -S` statistic is about flow control or congestion
/// (mlx5's `rx_prio3_pause_duration`, `tx_pause_storm_warning_events`,
/// `rx_ecn_mark`, `np_cnp_sent`, ...; other drivers' `*pause*`, `*pfc*`).
pub fn is_flow_control(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["pause", "pfc", "storm", "ecn", "cnp", "discard"]
        .iter()
        .any(|w| n.contains(w))
}

/// The priority flow control of Ethernet port `netdev` as the kernel's
/// DCB interface reports it (`dcb pfc show dev NETDEV`, iproute2): which
/// priorities pause, and the NIC's pause-storm prevention timeout
/// (`ethtool --get-tunable NETDEV pfc-prevention-tout`), each where
/// readable; one line per reading, or why it could not be read.
pub fn pfc_state(netdev: &str) -> Vec<String> {
    let run = |cmd: &str, args: &[&str]| -> Result<String, String> {
        let out = std::process::Command::new(cmd)
            .args(args)
            .output()
            .map_err(|e| format!("{cmd}: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(format!(
                "{cmd} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    let pfc = match run("dcb", &["pfc", "show", "dev", netdev]) {
        Ok(text) => format!("PFC on {netdev} (dcb): {}", text.replace('\n', "; ")),
        Err(e) => format!("PFC on {netdev}: not readable ({e})"),
    };
    let storm = match run("ethtool", &["--get-tunable", netdev, "pfc-prevention-tout"]) {
        Ok(text) => format!(
            "PFC storm prevention on {netdev} (ethtool): {}",
            text.replace('\n', "; ")
        ),
        Err(e) => format!("PFC storm prevention on {netdev}: not readable ({e})"),
    };
    vec![pfc, storm]
}

/// The Ethernet interface under port `port` of RDMA device `device`
/// (RoCE: the netdev its GID table names; `None` on InfiniBand or when
/// sysfs does not say).
pub fn netdev_of(device: &str, port: u8) -> Option<String> {
    let p = Path::new("/sys/class/infiniband")
        .join(device)
        .join("ports")
        .join(port.to_string())
        .join("gid_attrs/ndevs/0");
    let name = std::fs::read_to_string(p).ok()?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_string())
}

impl fmt::Display for NicCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return write!(f, "no NIC counters (none readable in sysfs)");
        }
        let nonzero = self.nonzero();
        if nonzero.is_empty() {
            return write!(f, "NIC counters: all {} zero", self.0.len());
        }
        write!(f, "NIC counters:")?;
        for (k, v) in nonzero {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ethtool_output_keeps_its_flow_control_counters_only() {
        let text = "NIC statistics:\n     rx_packets: 12\n     rx_prio3_pause: 7\n     rx_prio3_pause_duration: 1500\n     tx_pause_storm_warning_events: 1\n     rx_ecn_mark: 3\n     np_cnp_sent: 2\n     rx_discards_phy: 0\n     not a counter\n";
        let c = super::NicCounters::parse_ethtool(text);
        let names: Vec<&str> = c.iter().map(|(k, _)| k).collect();
        assert_eq!(
            names,
            [
                "np_cnp_sent",
                "rx_discards_phy",
                "rx_ecn_mark",
                "rx_prio3_pause",
                "rx_prio3_pause_duration",
                "tx_pause_storm_warning_events"
            ]
        );
        assert_eq!(c.get("rx_prio3_pause_duration"), Some(1500));
        assert_eq!(c.get("rx_packets"), None);
    }

    use super::*;

    /// A fake sysfs tree of soft-RoCE's shape under a fresh directory.
    fn fake(values: &[(&str, &str)]) -> PathBuf {
        let root = std::env::temp_dir().join(format!(
            "nessie-nic-counters-{}-{}",
            std::process::id(),
            values.len()
        ));
        let _ = std::fs::remove_dir_all(&root);
        let port = root.join("rxe0/ports/1");
        std::fs::create_dir_all(port.join("counters")).unwrap();
        std::fs::create_dir_all(port.join("hw_counters")).unwrap();
        for (path, v) in values {
            std::fs::write(port.join(path), v).unwrap();
        }
        root
    }

    #[test]
    fn a_ports_counters_are_read_deltas_taken_and_trouble_printed_first() {
        let root = fake(&[
            ("counters/port_xmit_packets", "100\n"),
            ("counters/port_rcv_packets", "90\n"),
            ("counters/not_a_number", "N/A\n"),
            ("hw_counters/duplicate_request", "2\n"),
            ("hw_counters/retry_exceeded_err", "0\n"),
        ]);
        let before = NicCounters::read_from(&root, "rxe0", 1).unwrap();
        assert_eq!(before.get("port_xmit_packets"), Some(100));
        assert_eq!(before.get("hw.duplicate_request"), Some(2));
        assert_eq!(before.get("not_a_number"), None);
        std::fs::write(root.join("rxe0/ports/1/counters/port_xmit_packets"), "160").unwrap();
        std::fs::write(root.join("rxe0/ports/1/hw_counters/duplicate_request"), "5").unwrap();
        let after = NicCounters::read_from(&root, "rxe0", 1).unwrap();
        let d = after.since(&before);
        assert_eq!(d.get("port_xmit_packets"), Some(60));
        assert_eq!(d.get("port_rcv_packets"), Some(0));
        assert_eq!(d.get("hw.duplicate_request"), Some(3));
        assert_eq!(
            d.nonzero(),
            vec![("hw.duplicate_request", 3), ("port_xmit_packets", 60)]
        );
        assert_eq!(
            d.to_string(),
            "NIC counters: hw.duplicate_request=3 port_xmit_packets=60"
        );
        // A counter that went backwards (reset) counts from zero.
        assert_eq!(before.since(&after).get("port_xmit_packets"), Some(100));
        // No such port: an error naming it; no counters: said so.
        let e = NicCounters::read_from(&root, "rxe0", 2).unwrap_err();
        assert!(e.to_string().contains("no port 2 of rxe0"), "{e}");
        assert_eq!(
            NicCounters::default().to_string(),
            "no NIC counters (none readable in sysfs)"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
