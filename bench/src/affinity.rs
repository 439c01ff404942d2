//! Keeping server threads and client threads of the threaded bench on cores
//! of their own (issue 25: the server-side-only line of Cell's Fig. 4 must
//! not share its core with polling client threads).
//!
//! A [`CoreSplit`] divides the cores this process may run on into server
//! cores (the last `n`) and client cores (the rest). Server threads are
//! found by name once the systems are started (`server-{node}-{worker}`,
//! the workers of every server-driven system and of Cell;
//! `cell-maint-{node}`, Cell's maintenance threads) and moved to the server
//! cores; each client thread moves itself to the client cores when it
//! starts. Linux only (`sched_setaffinity`); the libraries that spawn the
//! server threads know nothing of it.

use std::fs;

use crate::BenchError;

/// Name prefixes of the threads that serve requests or maintain a server's
/// tables.
const SERVER_THREADS: [&str; 2] = ["server-", "cell-maint-"];

/// Server cores and client cores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreSplit {
    servers: Vec<usize>,
    clients: Vec<usize>,
}

impl CoreSplit {
    /// The last `server_cores` of the cores this process may run on for
    /// servers, the others for clients; `None` for 0. Refused when fewer
    /// than `server_cores + 1` cores are available (clients need one).
    pub fn new(server_cores: usize) -> Result<Option<CoreSplit>, BenchError> {
        if server_cores == 0 {
            return Ok(None);
        }
        let cores = allowed_cores()?;
        if cores.len() <= server_cores {
            return Err(BenchError::Cores(format!(
                "--server-cores {server_cores} leaves no core for the clients: this process may run on {} core(s) ({cores:?})",
                cores.len()
            )));
        }
        let (clients, servers) = cores.split_at(cores.len() - server_cores);
        Ok(Some(CoreSplit {
            servers: servers.to_vec(),
            clients: clients.to_vec(),
        }))
    }

    /// The server cores.
    pub fn servers(&self) -> &[usize] {
        &self.servers
    }

    /// The client cores.
    pub fn clients(&self) -> &[usize] {
        &self.clients
    }

    /// Moves every server thread of this process (by name, see the module
    /// documentation) to the server cores; how many it moved.
    ///
    /// Linux's listing of `/proc/self/task` can skip a thread when another
    /// thread ends while it is read (the listing resumes by position), so
    /// the listing is read again until a pass finds no server thread it
    /// had not moved (at most four passes; moving a thread twice is
    /// harmless).
    pub fn pin_server_threads(&self) -> Result<usize, BenchError> {
        let mut moved = std::collections::BTreeSet::new();
        for _ in 0..4 {
            let before = moved.len();
            self.pin_listed_server_threads(&mut moved)?;
            if moved.len() == before && before > 0 {
                break;
            }
        }
        Ok(moved.len())
    }

    /// One pass over `/proc/self/task`: moves the server threads not in
    /// `moved` and adds them to it.
    fn pin_listed_server_threads(
        &self,
        moved: &mut std::collections::BTreeSet<i32>,
    ) -> Result<(), BenchError> {
        let tasks = fs::read_dir("/proc/self/task")
            .map_err(|e| BenchError::Cores(format!("listing /proc/self/task: {e}")))?;
        for task in tasks.flatten() {
            let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|t| t.parse::<i32>().ok())
            else {
                continue;
            };
            if moved.contains(&tid) {
                continue;
            }
            // A thread that ended meanwhile has no comm any more: skipped.
            let Ok(name) = fs::read_to_string(task.path().join("comm")) else {
                continue;
            };
            if SERVER_THREADS
                .iter()
                .any(|p| name.trim_end().starts_with(p))
            {
                set_affinity(tid, &self.servers)?;
                moved.insert(tid);
            }
        }
        Ok(())
    }

    /// Moves the calling thread to the client cores.
    pub fn pin_this_thread_to_clients(&self) -> Result<(), BenchError> {
        set_affinity(0, &self.clients)
    }
}

/// The cores this process may run on, ascending.
fn allowed_cores() -> Result<Vec<usize>, BenchError> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // writes at most size_of::<cpu_set_t>() bytes into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(BenchError::Cores(format!(
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: CPU_ISSET reads the set within its size.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Restricts thread `tid` (0: the caller) to `cores`.
fn set_affinity(tid: i32, cores: &[usize]) -> Result<(), BenchError> {
    // SAFETY: as in `allowed_cores`; CPU_SET writes within the set for
    // cores below CPU_SETSIZE, which `allowed_cores` returned.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cores {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(BenchError::Cores(format!(
            "sched_setaffinity({tid}, {cores:?}): {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_server_cores_is_no_split() {
        assert_eq!(CoreSplit::new(0).unwrap(), None);
    }

    #[test]
    fn a_split_leaves_the_clients_a_core_and_pins_named_threads() {
        let n = allowed_cores().unwrap().len();
        assert!(CoreSplit::new(n).is_err(), "no core left for clients");
        if n < 2 {
            return;
        }
        let split = CoreSplit::new(1).unwrap().unwrap();
        assert_eq!(split.servers().len(), 1);
        assert_eq!(split.clients().len(), n - 1);
        assert!(!split.clients().contains(&split.servers()[0]));
        // A thread named like a server worker is moved to the server core
        // (once it runs: a thread names itself when it starts).
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (started_tx, started) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("server-9-0".into())
            .spawn(move || {
                started_tx.send(()).unwrap();
                let _ = rx.recv();
                allowed_cores().unwrap()
            })
            .unwrap();
        started.recv().unwrap();
        assert!(split.pin_server_threads().unwrap() >= 1);
        tx.send(()).unwrap();
        assert_eq!(t.join().unwrap(), split.servers());
        // And a client thread moves itself.
        let s2 = split.clone();
        let cores = std::thread::spawn(move || {
            s2.pin_this_thread_to_clients().unwrap();
            allowed_cores().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(cores, split.clients());
    }
}
