//! Cuckoo insertion as the server-side tables do it (NessieSD's and
//! NessieHY's partially-coupled tables, Pilaf's hash table): a bounded
//! breadth-first search for a whole path of moves before anything is
//! touched, then the moves from the end of the path backwards, inside an odd
//! *move epoch*, so that a key is always in at least one of its candidates
//! (Pilaf section 3.4) and a client GET that found nothing can tell that a
//! move overlapped it. Every access is a CPU read or write of the node's own
//! memory through the machine's [`Io`], so a simulator can charge it.

use std::collections::VecDeque;
use std::future::Future;

use nessie_protocol::Error;

use nessie_exec::Io;

/// Bound on the entries a search visits.
const MAX_VISITED: usize = 4096;

/// A table of fixed-size entries in a node's data region, each holding at
/// most one key, that the node's server workers change by CPU.
pub trait CuckooTable {
    /// The key stored in `slot`; `None` if the entry is empty. An entry that
    /// cannot be read back is corruption (only the node's workers write it,
    /// under its lock) and is an error.
    fn occupant(&self, io: &Io, slot: u32) -> impl Future<Output = Result<Option<Vec<u8>>, Error>>;

    /// The candidate entries of `key`.
    fn candidates(&self, key: &[u8]) -> Vec<u32>;

    /// Byte offset and length of entry `slot` in the data region.
    fn entry_range(&self, slot: u32) -> (u64, u32);

    /// Byte offset of the node's move-epoch word.
    fn epoch_offset(&self) -> u64;
}

/// Breadth-first search for a path `c0 -> c1 -> ... -> ck` starting at one of
/// `starts` (the new key's full candidates) where each entry's occupant may
/// move to the next (one of its other candidates) and `ck` is empty. At most
/// `max_depth` moves.
pub async fn find_path<T: CuckooTable + ?Sized>(
    table: &T,
    io: &Io,
    starts: &[u32],
    max_depth: u8,
) -> Result<Option<Vec<u32>>, Error> {
    let mut paths: VecDeque<Vec<u32>> = starts.iter().map(|&s| vec![s]).collect();
    let mut visited: Vec<u32> = starts.to_vec();
    while let Some(path) = paths.pop_front() {
        if path.len() > usize::from(max_depth) || visited.len() > MAX_VISITED {
            break;
        }
        let Some(&last) = path.last() else { continue };
        let Some(occupant) = table.occupant(io, last).await? else {
            continue;
        };
        for alt in table.candidates(&occupant) {
            if visited.contains(&alt) {
                continue;
            }
            visited.push(alt);
            let mut next = path.clone();
            next.push(alt);
            if table.occupant(io, alt).await?.is_none() {
                return Ok(Some(next));
            }
            paths.push_back(next);
        }
    }
    Ok(None)
}

/// Moves the occupants along `path` from its end backwards (each key is
/// copied to its new entry before its old entry is overwritten), then stores
/// `first` (the new key's entry bytes) in the path's first entry, all between
/// two increments of the move epoch.
pub async fn shift<T: CuckooTable + ?Sized>(
    table: &T,
    io: &Io,
    path: &[u32],
    first: Vec<u8>,
) -> Result<(), Error> {
    let epoch_at = table.epoch_offset();
    let epoch = io.local_word(epoch_at).await?;
    io.local_write(epoch_at, (epoch + 1).to_le_bytes().to_vec())
        .await?;
    for w in path.windows(2).rev() {
        let (from, len) = table.entry_range(w[0]);
        let moving = io.local_read(from, len).await?;
        io.local_write(table.entry_range(w[1]).0, moving).await?;
    }
    if let Some(&slot) = path.first() {
        io.local_write(table.entry_range(slot).0, first).await?;
    }
    io.local_write(epoch_at, (epoch + 2).to_le_bytes().to_vec())
        .await?;
    Ok(())
}

/// Inserts a new key whose entry bytes are `entry` into one of its
/// candidates `cands`: the first empty one, else the first of a cuckoo path
/// found by [`find_path`] and made by [`shift`]. `false` when no path of at
/// most `max_depth` moves exists (the table is full for this key; nothing was
/// changed).
pub async fn insert<T: CuckooTable + ?Sized>(
    table: &T,
    io: &Io,
    cands: &[u32],
    entry: Vec<u8>,
    max_depth: u8,
) -> Result<bool, Error> {
    for &slot in cands {
        if table.occupant(io, slot).await?.is_none() {
            io.local_write(table.entry_range(slot).0, entry).await?;
            return Ok(true);
        }
    }
    match find_path(table, io, cands, max_depth).await? {
        Some(path) => {
            shift(table, io, &path, entry).await?;
            Ok(true)
        }
        None => Ok(false),
    }
}
