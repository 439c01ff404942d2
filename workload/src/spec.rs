//! What a mixed-workload run is asked to do ([`WorkloadSpec`]; the command
//! line options of the mix, [`MixArgs`], are shared by `nessie run` and
//! `nessie node run`), checked against the store's configuration before
//! anything starts, and why a run could not be done ([`WorkloadError`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clap::Args;
use nessie_protocol::{Config, Error};

/// The options of the mixed workload, as `nessie run` and `nessie node
/// run` take them.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct MixArgs {
    /// Client threads per node (`nessie node`: at most `[store]
    /// clients_per_node`).
    #[arg(long, default_value_t = 2)]
    pub clients: u16,
    /// Distinct keys.
    #[arg(long, default_value_t = 10_000)]
    pub keys: u32,
    /// Key size in bytes (at least 8; `nessie node`: at most `[store]
    /// max_key_len`).
    #[arg(long, default_value_t = 32)]
    pub key_size: u32,
    /// Value size in bytes, the largest with `--value-mix` (`nessie
    /// node`: at most `[store] max_value_len`).
    #[arg(long, default_value_t = 256)]
    pub value_size: u32,
    /// How value sizes are drawn: fixed (every value `--value-size` bytes),
    /// uniform (from 1, or 8 when recording, to `--value-size`) or etc
    /// (Facebook's ETC pool, SIGMETRICS'12: median 168 B, mean 330 B, a
    /// long tail, cut at `--value-size`).
    #[arg(long, value_enum, default_value_t = crate::ValueMix::Fixed)]
    pub value_mix: crate::ValueMix,
    /// Percent of GETs (the rest are PUTs, minus DELETEs).
    #[arg(long, default_value_t = 90)]
    pub get_pct: u32,
    /// Percent of DELETEs (deleted keys are re-inserted by later PUTs).
    #[arg(long, default_value_t = 0)]
    pub delete_pct: u32,
    /// Seed of the workload generators.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// One of YCSB's core workloads instead of the mix above (it sets the
    /// operations and the key distribution: `--get-pct` and
    /// `--delete-pct` are then not used): ycsb-a (50 % updates), ycsb-b
    /// (5 % updates), ycsb-c (reads only), ycsb-d (5 % inserts, latest
    /// keys), ycsb-e (95 % scans of 1 to `--scan-len` entries, 5 %
    /// inserts: stores with range scans), ycsb-f (50 %
    /// read-modify-writes); Zipfian keys but for D.
    #[arg(long, value_enum)]
    pub workload: Option<crate::Ycsb>,
}

impl MixArgs {
    /// The operations asked for, in words: the YCSB workload, or the
    /// percentages.
    pub fn describe(&self) -> String {
        match self.workload {
            Some(w) => {
                let m = w.mix();
                format!(
                    "{w} ({} % read, {} % update, {} % insert, {} % scan, {} % read-modify-write, {:?} keys)",
                    m.read, m.update, m.insert, m.scan, m.rmw, m.keys
                )
            }
            None => format!("{}% GET / {}% DELETE", self.get_pct, self.delete_pct),
        }
    }

    /// The spec of a run of these options measured for `duration`, keys
    /// preloaded first, nothing recorded.
    pub fn spec(&self, duration: Duration) -> WorkloadSpec {
        WorkloadSpec {
            clients: self.clients,
            keys: self.keys,
            key_size: self.key_size,
            value_size: self.value_size,
            value_mix: self.value_mix,
            get_pct: self.get_pct,
            delete_pct: self.delete_pct,
            duration,
            preload: true,
            seed: self.seed,
            max_ops: 0,
            think: Duration::ZERO,
            record: false,
            start_at: None,
            scan_pct: 0,
            scan_len: 0,
            ycsb: self.workload,
        }
    }
}

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSpec {
    /// Client threads on each node the run drives.
    pub clients: u16,
    /// Distinct keys.
    pub keys: u32,
    /// Key size in bytes (at least 8).
    pub key_size: u32,
    /// Value size in bytes (the largest, when sizes vary).
    pub value_size: u32,
    /// How value sizes are drawn ([`crate::ValueMix`]).
    pub value_mix: crate::ValueMix,
    /// Percent of GETs.
    pub get_pct: u32,
    /// Percent of DELETEs.
    pub delete_pct: u32,
    /// Duration of the measured phase.
    pub duration: Duration,
    /// PUT every key once before measuring.
    pub preload: bool,
    /// Seed of the generators.
    pub seed: u64,
    /// Most operations per client thread (0: as many as fit the duration).
    pub max_ops: u64,
    /// Pause of each client thread after each finished operation (zero: none).
    pub think: Duration,
    /// Record every operation of the measured phase
    /// ([`super::WorkloadReport::history`]).
    pub record: bool,
    /// The wall-clock instant at which to start measuring, the same on every
    /// node of a run (their clocks agree within the cluster's `clock_skew`,
    /// checked when they connect): a start barrier across nodes that needs
    /// no messages, given up front or announced once this node is ready
    /// ([`StartAt`]). The run fails if the instant passed more than
    /// [`START_LATE_LIMIT`] before this node was ready (its preload or
    /// connections took longer: choose a later instant). `None`: start as
    /// soon as this node is ready.
    pub start_at: Option<StartAt>,
    /// Percent of range scans (ordered stores only: Cell).
    pub scan_pct: u32,
    /// Entries a scan asks for (from a uniformly drawn key to the end);
    /// with YCSB's E, the most a scan asks for (it draws 1 to this many).
    pub scan_len: u32,
    /// One of YCSB's core workloads instead of the percentages above
    /// ([`crate::Ycsb`]).
    pub ycsb: Option<crate::Ycsb>,
}

/// When the measured phase starts ([`WorkloadSpec::start_at`]).
#[derive(Clone, Debug, PartialEq)]
pub enum StartAt {
    /// At this wall-clock instant, known before the run (`--start-at
    /// SECONDS`): the nodes' preloads and connections must be done by then.
    Instant(SystemTime),
    /// At the instant the [`Announcer`] returns, asked once this node is
    /// ready (connected and preloaded; `--start-at -` reads it from
    /// standard input): whoever starts the nodes waits for all of them to
    /// be ready, then announces one instant a little ahead to all, so no
    /// node waits longer than the slowest one needs.
    Announced(Announcer),
}

/// Asked once, when a node is ready, for the wall-clock instant its
/// measured phase starts at; an error (no instant, or not a valid one)
/// fails the run.
#[derive(Clone)]
pub struct Announcer(Arc<dyn Fn() -> Result<SystemTime, AnnounceError> + Send + Sync>);

/// Why an [`Announcer`] gave no instant: the announcer's own error.
pub type AnnounceError = Box<dyn std::error::Error + Send + Sync>;

impl Announcer {
    /// The announcer that asks `f`.
    pub fn new(
        f: impl Fn() -> Result<SystemTime, AnnounceError> + Send + Sync + 'static,
    ) -> Announcer {
        Announcer(Arc::new(f))
    }

    /// The announced instant.
    ///
    /// # Errors
    ///
    /// The announcer's own error when it has no instant to give.
    pub fn ask(&self) -> Result<SystemTime, AnnounceError> {
        (self.0)()
    }
}

impl std::fmt::Debug for Announcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Announcer")
    }
}

impl PartialEq for Announcer {
    /// The same announcer (not merely one announcing the same instant).
    fn eq(&self, other: &Announcer) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// How late a node may be ready for [`WorkloadSpec::start_at`] and still run.
pub const START_LATE_LIMIT: Duration = Duration::from_millis(100);

/// Why the workload could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// A bad option (refused before anything ran).
    #[error("invalid workload: {0}")]
    Arg(#[from] BadSpec),
    /// The [`Announcer`] gave no start instant (the run was stopped before
    /// its measured phase).
    #[error("no start instant was announced: {0}")]
    NoStartInstant(#[source] AnnounceError),
    /// The start instant had passed, by more than [`START_LATE_LIMIT`],
    /// when this node was ready (connections and preload took longer): the
    /// run was stopped before its measured phase.
    #[error(
        "the start instant passed {:.3} s before this node was ready \
         (connections and preload took longer): choose a later --start-at",
        late.as_secs_f64()
    )]
    StartedLate {
        /// How long before the node was ready the instant passed.
        late: Duration,
    },
    /// A client thread panicked (its operations' outcomes are unknown).
    #[error("a client thread panicked")]
    ClientPanicked,
    /// The store failed for good (opening a client, preloading).
    #[error(transparent)]
    Store(#[from] Error),
}

/// What a store accepts, for [`check`]: from the protocol's configuration
/// (Nessie and the baselines) or Cell's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreLimits {
    /// Client ids per node.
    pub clients_per_node: u16,
    /// Largest key.
    pub max_key_len: u32,
    /// Largest value.
    pub max_value_len: u32,
    /// Most entries one range scan returns; `None`: no range scans.
    pub scan_page: Option<u32>,
}

impl From<&Config> for StoreLimits {
    fn from(cfg: &Config) -> StoreLimits {
        StoreLimits {
            // A node's own clients and the clients without storage it hosts.
            clients_per_node: cfg.shares_per_node(),
            max_key_len: cfg.max_key_len,
            max_value_len: cfg.max_value_len,
            scan_page: None,
        }
    }
}

impl From<&nessie_cell::CellConfig> for StoreLimits {
    fn from(cfg: &nessie_cell::CellConfig) -> StoreLimits {
        StoreLimits {
            clients_per_node: cfg.clients_per_node,
            max_key_len: cfg.max_key_len,
            max_value_len: cfg.max_value_len,
            scan_page: Some(cfg.scan_page),
        }
    }
}

/// Which option of a [`WorkloadSpec`] the store refuses, and what it must
/// be ([`WorkloadError::Arg`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadSpec {
    /// No clients, or more than a node has ids for.
    #[error("--clients must be 1..={max} ([store] clients_per_node)")]
    Clients {
        /// Client ids per node.
        max: u16,
    },
    /// No keys, or a measured phase of no time.
    #[error("--keys and --seconds must be positive")]
    Empty,
    /// Keys shorter than 8 bytes or longer than the store's largest.
    #[error("--key-size must be 8..={max} ([store] max_key_len)")]
    KeySize {
        /// The store's largest key.
        max: u32,
    },
    /// Values longer than the store's largest.
    #[error("--value-size must be at most {max} ([store] max_value_len)")]
    ValueSize {
        /// The store's largest value.
        max: u32,
    },
    /// Values too short to be unique when a history is recorded.
    #[error(
        "--value-size must be at least {min} B when recording a history \
         (each PUT writes a value of its own)"
    )]
    RecordedValueSize {
        /// The shortest value a recorded PUT can make unique.
        min: usize,
    },
    /// The shares of GETs, DELETEs and scans add up to more than 100 %.
    #[error("--get-pct plus --delete-pct plus --scan-pct exceeds 100")]
    Mix,
    /// Range scans asked of a store without them.
    #[error(
        "{} needs a store with range scans (--system cell)",
        if *ycsb_e { "--workload ycsb-e (mostly range scans)" } else { "--scan-pct" }
    )]
    NoScans {
        /// Asked by YCSB workload E rather than `--scan-pct`.
        ycsb_e: bool,
    },
    /// A scan length of 0 or past the store's scan page.
    #[error("--scan-len must be 1..={page} (Cell's scan page)")]
    ScanLen {
        /// The most entries one range scan returns.
        page: u32,
    },
}

/// Checks `spec` against what the store accepts.
///
/// # Errors
///
/// [`WorkloadError::Arg`] with the first option the store refuses.
pub fn check(spec: &WorkloadSpec, store: impl Into<StoreLimits>) -> Result<(), WorkloadError> {
    let cfg: StoreLimits = store.into();
    let bad = |b: BadSpec| Err(WorkloadError::Arg(b));
    if spec.clients == 0 || spec.clients > cfg.clients_per_node {
        return bad(BadSpec::Clients {
            max: cfg.clients_per_node,
        });
    }
    if spec.keys == 0 || spec.duration.is_zero() {
        return bad(BadSpec::Empty);
    }
    if spec.key_size < 8 || spec.key_size > cfg.max_key_len {
        return bad(BadSpec::KeySize {
            max: cfg.max_key_len,
        });
    }
    if spec.value_size > cfg.max_value_len {
        return bad(BadSpec::ValueSize {
            max: cfg.max_value_len,
        });
    }
    if spec.record && (spec.value_size as usize) < nessie_check::MIN_RECORDED_VALUE_SIZE {
        return bad(BadSpec::RecordedValueSize {
            min: nessie_check::MIN_RECORDED_VALUE_SIZE,
        });
    }
    if spec.get_pct + spec.delete_pct + spec.scan_pct > 100 {
        return bad(BadSpec::Mix);
    }
    let ycsb_scans = spec.ycsb.is_some_and(crate::Ycsb::scans);
    if spec.scan_pct > 0 || ycsb_scans {
        let Some(page) = cfg.scan_page else {
            return bad(BadSpec::NoScans { ycsb_e: ycsb_scans });
        };
        if spec.scan_len == 0 || spec.scan_len > page {
            return bad(BadSpec::ScanLen { page });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::spec;

    #[test]
    fn bad_specs_are_refused() {
        let cfg = Config {
            clients_per_node: 2,
            max_key_len: 16,
            max_value_len: 32,
            ..Config::default()
        };
        assert!(check(&spec(), &cfg).is_ok());
        assert!(check(
            &WorkloadSpec {
                value_size: 7,
                ..spec()
            },
            &cfg
        )
        .is_ok());
        for s in [
            WorkloadSpec {
                clients: 3,
                ..spec()
            },
            WorkloadSpec {
                clients: 0,
                ..spec()
            },
            WorkloadSpec {
                key_size: 17,
                ..spec()
            },
            WorkloadSpec {
                key_size: 4,
                ..spec()
            },
            WorkloadSpec {
                value_size: 33,
                ..spec()
            },
            WorkloadSpec {
                get_pct: 99,
                delete_pct: 2,
                ..spec()
            },
            WorkloadSpec { keys: 0, ..spec() },
            // Too small for a value of its own per write, when recording.
            WorkloadSpec {
                value_size: 7,
                record: true,
                ..spec()
            },
            WorkloadSpec {
                scan_pct: 5,
                scan_len: 10,
                ..spec()
            },
        ] {
            assert!(
                matches!(check(&s, &cfg), Err(WorkloadError::Arg(_))),
                "{s:?}"
            );
        }
        // Scans: only a store that has them, at most a page each.
        let cell = nessie_cell::CellConfig {
            clients_per_node: 2,
            max_key_len: 16,
            max_value_len: 32,
            scan_page: 20,
            ..nessie_cell::CellConfig::default()
        };
        let scans = |scan_pct, scan_len| WorkloadSpec {
            get_pct: 50,
            scan_pct,
            scan_len,
            ..spec()
        };
        assert!(check(&scans(10, 20), &cell).is_ok());
        for (s, why) in [
            (scans(10, 21), BadSpec::ScanLen { page: 20 }),
            (scans(10, 0), BadSpec::ScanLen { page: 20 }),
            (scans(46, 5), BadSpec::Mix),
        ] {
            assert!(
                matches!(check(&s, &cell), Err(WorkloadError::Arg(b)) if b == why),
                "{s:?}"
            );
        }
        assert!(matches!(
            check(&scans(10, 5), &cfg),
            Err(WorkloadError::Arg(BadSpec::NoScans { ycsb_e: false }))
        ));
    }
}
