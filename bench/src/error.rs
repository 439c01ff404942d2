//! The typed errors of `nessie bench`.

/// Why `nessie bench` could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A system name that is none of the systems.
    #[error("unknown system {0:?} (expected one of: nessie, nessie-sd, nessie-hy, pilaf, cell, cell-server, cell-client)")]
    UnknownName(String),
    /// A system listed twice.
    #[error("system {0} is listed twice in --systems")]
    DuplicateSystem(String),
    /// `--systems` named nothing.
    #[error("--systems names no system")]
    NoSystems,
    /// A numeric argument out of range.
    #[error("invalid --{arg} {value}: {reason}")]
    OutOfRange {
        /// The argument (without dashes).
        arg: &'static str,
        /// Its value, printed.
        value: String,
        /// What is allowed.
        reason: &'static str,
    },
    /// Two arguments that do not go together.
    #[error("{0}")]
    Conflict(&'static str),
    /// The store refused the derived configuration.
    #[error("configuration: {0}")]
    Config(#[from] nessie_protocol::ConfigError),
    /// Starting a system failed.
    #[error("starting {system}: {source}")]
    Start {
        /// The system.
        system: String,
        /// Why.
        source: nessie_protocol::Error,
    },
    /// The simulator refused its configuration.
    #[error("simulator: {0}")]
    Sim(String),
    /// Server and client threads could not be kept on cores of their own
    /// (`--server-cores`).
    #[error("cores: {0}")]
    Cores(String),
    /// Every selected system failed its preload.
    #[error("no system could be measured: {0}")]
    NothingMeasured(String),
    /// Writing the plots failed.
    #[error("writing plots to {dir}: {reason}")]
    Plot {
        /// The directory.
        dir: String,
        /// Why.
        reason: String,
    },
    /// An I/O error.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// A size argument that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a size (examples: 256, 4K, 4KiB, 128k)")]
pub struct BadSize(pub String);

/// Parses `256`, `4K`, `4KiB`, `4k`, `1M` (binary multiples).
pub fn parse_size(s: &str) -> Result<u64, BadSize> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &lower[digits.len()..];
    let mult: u64 = match unit {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        _ => return Err(BadSize(s.to_string())),
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| BadSize(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("256"), Ok(256));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("128KiB"), Ok(128 << 10));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("-1").is_err());
    }
}
