//! Per-region logs (§2.6): every write a server makes to a region's nodes
//! and extents, plus the start and end of meganode splits, appended to the
//! region's own log file, so that the survivors of a server failure can
//! rebuild its regions and clean up the meganodes an unfinished split left
//! behind.
//!
//! The paper logs to replicated network storage (EBS, HDFS) and its
//! prototype to local disks; here every server of a deployment logs into one
//! directory (a temporary one in the tests), standing in for such shared
//! storage. A record is `len u32 | crc64 u64 | payload`; a torn record at the
//! end of a log (a crash mid-append) is ignored on replay.
//!
//! [`LogSink::in_memory`] keeps the same bytes in the process's memory
//! instead of files: the cluster simulator's stand-in for shared storage
//! that outlives a server (its servers fail while the process lives on).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nessie_exec::mailbox::CRC64;
use nessie_protocol::{BackendError, EndpointRefusal, Error, FabricError, NodeId, TransportError};

use crate::ptr::RegionId;

/// One logged event of a region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogRecord {
    /// Bytes written at `offset` of the region (a node image, an extent, the
    /// root word).
    Write {
        /// Offset within the region.
        offset: u64,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// The region was created (by a split of `source`, or as the first one).
    Created {
        /// The meganode split to create it, if any.
        source: Option<RegionId>,
    },
    /// A meganode split of this region started at `split`, copying to the
    /// new meganode `new`, allocated on `target`: from here on, until the
    /// split's `SplitFinish` or `SplitAbort`, the region takes no write, and
    /// `new` is this split's to keep or to drop.
    SplitStart {
        /// The split key.
        split: Vec<u8>,
        /// The server the new meganode is created on.
        target: NodeId,
        /// The new meganode (allocated before this record).
        new: RegionId,
    },
    /// The upper part was copied into `new`.
    SplitCopied {
        /// The new meganode.
        new: RegionId,
    },
    /// The split into `new` is complete (relinked, invalidated).
    SplitFinish {
        /// The new meganode.
        new: RegionId,
    },
    /// The split was abandoned before relinking.
    SplitAbort,
    /// The region's writes were opened (a split's new meganode).
    Opened,
    /// The parent entry of the split into `new` is in place (step 5: the
    /// entry in the parent meganode, or a new root meganode over both).
    SplitLinked {
        /// The new meganode.
        new: RegionId,
    },
    /// This region was the root meganode when its split finished, and the
    /// new root meganode `root` (allocated before this record) is being
    /// made over it and the split's new meganode; the root word moves to
    /// it only once it is complete.
    SplitNewRoot {
        /// The new root meganode.
        root: RegionId,
        /// The split's new meganode (the root's right child).
        new: RegionId,
    },
}

impl LogRecord {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            LogRecord::Write { offset, bytes } => {
                b.push(1);
                b.extend_from_slice(&offset.to_le_bytes());
                b.extend_from_slice(bytes);
            }
            LogRecord::Created { source } => {
                b.push(2);
                b.extend_from_slice(&source.map_or(0, |r| r.0).to_le_bytes());
            }
            LogRecord::SplitStart { split, target, new } => {
                b.push(3);
                b.extend_from_slice(&target.0.to_le_bytes());
                b.extend_from_slice(&new.0.to_le_bytes());
                b.extend_from_slice(split);
            }
            LogRecord::SplitCopied { new } => {
                b.push(4);
                b.extend_from_slice(&new.0.to_le_bytes());
            }
            LogRecord::SplitFinish { new } => {
                b.push(5);
                b.extend_from_slice(&new.0.to_le_bytes());
            }
            LogRecord::SplitAbort => b.push(6),
            LogRecord::Opened => b.push(7),
            LogRecord::SplitLinked { new } => {
                b.push(8);
                b.extend_from_slice(&new.0.to_le_bytes());
            }
            LogRecord::SplitNewRoot { root, new } => {
                b.push(9);
                b.extend_from_slice(&root.0.to_le_bytes());
                b.extend_from_slice(&new.0.to_le_bytes());
            }
        }
        b
    }

    fn decode(b: &[u8]) -> Option<LogRecord> {
        let (&kind, rest) = b.split_first()?;
        let u32_at = |s: &[u8]| {
            s.get(..4)
                .and_then(|x| x.try_into().ok())
                .map(u32::from_le_bytes)
        };
        Some(match kind {
            1 => LogRecord::Write {
                offset: u64::from_le_bytes(rest.get(..8)?.try_into().ok()?),
                bytes: rest.get(8..)?.to_vec(),
            },
            2 => LogRecord::Created {
                source: Some(u32_at(rest)?).filter(|&r| r != 0).map(RegionId),
            },
            3 => LogRecord::SplitStart {
                target: NodeId(u16::from_le_bytes(rest.get(..2)?.try_into().ok()?)),
                new: RegionId(u32_at(rest.get(2..)?)?),
                split: rest.get(6..)?.to_vec(),
            },
            4 => LogRecord::SplitCopied {
                new: RegionId(u32_at(rest)?),
            },
            5 => LogRecord::SplitFinish {
                new: RegionId(u32_at(rest)?),
            },
            6 => LogRecord::SplitAbort,
            7 => LogRecord::Opened,
            8 => LogRecord::SplitLinked {
                new: RegionId(u32_at(rest)?),
            },
            9 => LogRecord::SplitNewRoot {
                root: RegionId(u32_at(rest)?),
                new: RegionId(u32_at(rest.get(4..)?)?),
            },
            _ => return None,
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A region log's file could not be used: what was being done, and the
/// system's error.
#[derive(Debug, thiserror::Error)]
#[error("region log: {what}: {source}")]
pub struct LogError {
    /// What was being done (`open`, `append`, `sync`, ...).
    pub what: &'static str,
    /// The system's error.
    #[source]
    pub source: std::io::Error,
}

/// A log that could not be used, as the server's request meets it: a
/// refusal before anything of the request took effect, carrying the
/// [`LogError`] (reached by `downcast_ref`).
fn io_error(what: &'static str, source: std::io::Error) -> Error {
    Error::Fabric(FabricError::Transport(TransportError::Endpoint(
        EndpointRefusal::Backend(BackendError::new(LogError { what, source })),
    )))
}

/// Where a [`LogSink`] keeps its logs.
#[derive(Debug)]
enum Store {
    /// One file per region in a directory.
    Files {
        dir: PathBuf,
        sync: bool,
        files: Mutex<HashMap<RegionId, File>>,
    },
    /// One byte string per region in memory.
    Memory(Mutex<HashMap<RegionId, Vec<u8>>>),
}

/// The logs of a deployment's regions.
#[derive(Debug)]
pub struct LogSink {
    store: Store,
}

impl LogSink {
    /// Logs in `dir` (created if missing); `sync`: fsync every append.
    pub fn new(dir: &Path, sync: bool) -> Result<LogSink, Error> {
        std::fs::create_dir_all(dir).map_err(|e| io_error("create directory", e))?;
        Ok(LogSink {
            store: Store::Files {
                dir: dir.to_path_buf(),
                sync,
                files: Mutex::new(HashMap::new()),
            },
        })
    }

    /// Logs kept in this process's memory (the same bytes a file would
    /// hold): shared storage for servers that fail while the process lives.
    pub fn in_memory() -> LogSink {
        LogSink {
            store: Store::Memory(Mutex::new(HashMap::new())),
        }
    }

    fn path(dir: &Path, region: RegionId) -> PathBuf {
        dir.join(format!("region-{}.log", region.0))
    }

    /// Appends `records` to `region`'s log.
    pub fn append(&self, region: RegionId, records: &[LogRecord]) -> Result<(), Error> {
        let mut buf = Vec::new();
        for r in records {
            let payload = r.encode();
            buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            buf.extend_from_slice(&CRC64.checksum(&payload).to_le_bytes());
            buf.extend_from_slice(&payload);
        }
        match &self.store {
            Store::Memory(logs) => {
                lock(logs)
                    .entry(region)
                    .or_default()
                    .extend_from_slice(&buf);
                Ok(())
            }
            Store::Files { dir, sync, files } => {
                let mut files = lock(files);
                let f = match files.entry(region) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => e.insert(
                        OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(Self::path(dir, region))
                            .map_err(|e| io_error("open", e))?,
                    ),
                };
                f.write_all(&buf).map_err(|e| io_error("append", e))?;
                if *sync {
                    f.sync_data().map_err(|e| io_error("sync", e))?;
                }
                Ok(())
            }
        }
    }

    /// Every intact record of `region`'s log, in order (empty if it has none).
    pub fn read(&self, region: RegionId) -> Result<Vec<LogRecord>, Error> {
        let mut bytes = Vec::new();
        match &self.store {
            Store::Memory(logs) => {
                if let Some(b) = lock(logs).get(&region) {
                    bytes.clone_from(b);
                }
            }
            Store::Files { dir, .. } => match File::open(Self::path(dir, region)) {
                Ok(mut f) => {
                    f.read_to_end(&mut bytes).map_err(|e| io_error("read", e))?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(io_error("open", e)),
            },
        }
        let mut out = Vec::new();
        let mut at = 0;
        while at + 12 <= bytes.len() {
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4])) as usize;
            let crc = u64::from_le_bytes(bytes[at + 4..at + 12].try_into().unwrap_or([0; 8]));
            let Some(payload) = bytes.get(at + 12..at + 12 + len) else {
                break;
            };
            if CRC64.checksum(payload) != crc {
                break;
            }
            match LogRecord::decode(payload) {
                Some(r) => out.push(r),
                None => break,
            }
            at += 12 + len;
        }
        Ok(out)
    }

    /// Deletes `region`'s log (the region was dropped).
    pub fn remove(&self, region: RegionId) -> Result<(), Error> {
        match &self.store {
            Store::Memory(logs) => {
                lock(logs).remove(&region);
                Ok(())
            }
            Store::Files { dir, files, .. } => {
                lock(files).remove(&region);
                match std::fs::remove_file(Self::path(dir, region)) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(io_error("remove", e)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_torn_tail_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let sink = LogSink::new(dir.path(), false).unwrap();
        let recs = vec![
            LogRecord::Created { source: None },
            LogRecord::Write {
                offset: 64,
                bytes: vec![1, 2, 3],
            },
            LogRecord::SplitStart {
                split: b"m".to_vec(),
                target: NodeId(2),
                new: RegionId(5),
            },
            LogRecord::SplitCopied { new: RegionId(5) },
            LogRecord::SplitFinish { new: RegionId(5) },
            LogRecord::SplitAbort,
            LogRecord::Opened,
            LogRecord::SplitLinked { new: RegionId(5) },
            LogRecord::SplitNewRoot {
                root: RegionId(6),
                new: RegionId(5),
            },
        ];
        sink.append(RegionId(1), &recs).unwrap();
        assert_eq!(sink.read(RegionId(1)).unwrap(), recs);
        let path = dir.path().join("region-1.log");
        let mut raw = std::fs::read(&path).unwrap();
        raw.extend_from_slice(&[9, 0, 0, 0, 1, 2]);
        std::fs::write(&path, raw).unwrap();
        assert_eq!(sink.read(RegionId(1)).unwrap(), recs);
        assert!(sink.read(RegionId(9)).unwrap().is_empty());
        sink.remove(RegionId(1)).unwrap();
        assert!(sink.read(RegionId(1)).unwrap().is_empty());
    }

    #[test]
    fn logs_in_memory_read_back_as_files_do() {
        let sink = LogSink::in_memory();
        let recs = vec![
            LogRecord::Created { source: None },
            LogRecord::Write {
                offset: 8,
                bytes: vec![4, 5],
            },
        ];
        sink.append(RegionId(3), &recs[..1]).unwrap();
        sink.append(RegionId(3), &recs[1..]).unwrap();
        assert_eq!(sink.read(RegionId(3)).unwrap(), recs);
        assert!(sink.read(RegionId(4)).unwrap().is_empty());
        sink.remove(RegionId(3)).unwrap();
        assert!(sink.read(RegionId(3)).unwrap().is_empty());
    }
}
