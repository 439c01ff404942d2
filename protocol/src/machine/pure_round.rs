//! A client without storage's requests (docs/protocol.md §2.4): the data
//! round that writes an entry through its windows, the heartbeat riding on
//! it, and the lease block's READ and CAS. The rest of the protocol sees
//! only [`Cx::write_dte`] and [`Cx::dte_written`].

use crate::addr::{DteAddr, RemoteAddr};
use crate::error::Error;
use crate::fabric::{FabricError, Op, OpOutput};
use crate::machine::context::Cx;
use crate::machine::io::Results;
use crate::pure::LeaseWord;
use crate::time::duration_nanos;

impl Cx<'_> {
    /// Writes a fresh entry of a client without storage's share through its
    /// window: its state and recycle words each by a CAS that expects what
    /// the entry held when it was found free (a CAS is never duplicated, so
    /// no copy can later undo the commit or a recycle mark), its deadline
    /// and the rest by WRITEs, all in one round, with the heartbeat when it
    /// is due.
    ///
    /// # Errors
    ///
    /// `Timeout` (nothing posted, the entry free again) when the attempt may
    /// no longer start a mutation (the data round keeps the margin rule as
    /// every mutation does), or when the client holds no key for the
    /// entry's class (it then asks for a newer generation).
    pub(crate) fn write_pure_dte(&mut self, dte: DteAddr, data: Vec<u8>) -> Result<(), Error> {
        let window = self.client.cfg.window_of(self.client.id, dte.class());
        let key = self
            .client
            .pure
            .as_ref()
            .and_then(|p| p.keys.get(usize::from(dte.class())).copied());
        let (Some(window), Some(key), true) = (window, key, self.may_mutate()) else {
            if key.is_none() {
                if let Some(p) = self.client.pure.as_mut() {
                    p.revoked();
                }
            }
            self.client.alloc.release_unwritten(dte);
            return Err(Error::Timeout);
        };
        let offset = self.client.cfg.data_tables().entry_offset(dte);
        let (state, recycle) = self.client.alloc.claim_words(dte);
        let word = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().unwrap_or([0; 8]));
        let at = |delta: u64| RemoteAddr::data(dte.node(), offset + delta);
        let unwindowed = self.client.faults.pure_unwindowed;
        let through = |op: Op| match unwindowed {
            // Broken variant: no window, so no revocation.
            true => op,
            false => Op::Windowed {
                window,
                key,
                op: Box::new(op),
            },
        };
        if self.client.faults.pure_state_by_write {
            // Broken variant: the state and recycle words in the WRITE.
            self.io.issue(through(Op::Write { addr: at(0), data }));
            return Ok(());
        }
        let parts = [
            Op::Cas {
                addr: at(0),
                expect: state,
                new: word(0),
            },
            Op::Cas {
                addr: at(16),
                expect: recycle,
                new: word(16),
            },
            Op::Write {
                addr: at(8),
                data: data[8..16].to_vec(),
            },
            Op::Write {
                addr: at(24),
                data: data[24..].to_vec(),
            },
        ];
        for op in parts {
            self.io.issue(through(op));
        }
        self.beat_if_due();
        Ok(())
    }

    /// How many requests the data round has before its heartbeat.
    fn data_round_parts(&self) -> usize {
        if self.client.faults.pure_state_by_write {
            1
        } else {
            4
        }
    }

    /// Whether the data round of [`Cx::write_pure_dte`] wrote entry `dte`
    /// whole. An entry whose round failed, or found other words than it
    /// expected, is never linked and waits for the next generation
    /// ([`crate::alloc::Allocator::quarantine`]); a refused window means the
    /// client's keys were revoked (its lease was taken back): it asks for a
    /// newer generation, and the attempt is retried (`Timeout`: nothing was
    /// linked).
    pub(crate) fn pure_dte_written(
        &mut self,
        dte: DteAddr,
        results: &Results,
    ) -> Result<(), Error> {
        let expected = self.client.alloc.claim_words(dte);
        let parts = self.data_round_parts();
        let mut outcome = Ok(());
        if let Some(beat) = results.get(parts) {
            outcome = self.on_beat(beat);
        }
        for (i, r) in results.iter().take(parts).enumerate() {
            let fine = match (i, r) {
                (0, Ok(OpOutput::Cas { previous })) => *previous == expected.0,
                (1, Ok(OpOutput::Cas { previous })) => *previous == expected.1,
                (_, Ok(OpOutput::Written)) => true,
                (_, Err(FabricError::WindowRefused { .. })) => {
                    if let Some(p) = self.client.pure.as_mut() {
                        p.revoked();
                    }
                    outcome = Err(Error::Timeout);
                    continue;
                }
                (_, Err(e)) => {
                    outcome = outcome.and(Err(e.clone().into()));
                    continue;
                }
                _ => false,
            };
            if !fine {
                outcome = outcome.and(Err(Error::Conflict));
            }
        }
        if results.len() < parts {
            outcome = outcome.and(Err(Error::Conflict));
        }
        if outcome.is_err() {
            self.client.alloc.quarantine(dte);
        }
        outcome
    }

    /// The heartbeat, when due: a CAS advancing the count in the lease
    /// block (outside the windows), in the round of the data writes;
    /// [`Cx::pure_dte_written`] reads its result.
    fn beat_if_due(&mut self) {
        if self
            .client
            .pure
            .as_ref()
            .is_some_and(|p| self.now.0 >= p.beat_due)
        {
            self.beat();
        }
    }

    /// Issues the heartbeat: a CAS advancing the count in the lease block
    /// (nothing for a client with storage); [`Cx::on_beat`] reads its
    /// result.
    pub(crate) fn beat(&mut self) {
        let Some(p) = &self.client.pure else {
            return;
        };
        let Some(at) = self.client.cfg.lease_block(self.client.id) else {
            return;
        };
        self.io.issue(Op::Cas {
            addr: RemoteAddr::data(self.client.id.node, at + 8),
            expect: p.beat,
            new: p.beat.wrapping_add(1),
        });
    }

    /// The heartbeat's result: advanced (the next one due a third of the
    /// lease term on), or found another count (the agent took the share
    /// back and reset it: the keys are dead, and the lease block will say
    /// so), or failed (tried again with the next write).
    pub(crate) fn on_beat(&mut self, r: &Result<OpOutput, FabricError>) -> Result<(), Error> {
        let third = duration_nanos(self.cfg().lease_term) / 3;
        let now = self.now.0;
        let Some(p) = self.client.pure.as_mut() else {
            return Ok(());
        };
        match r {
            Ok(OpOutput::Cas { previous }) if *previous == p.beat => {
                p.beat = p.beat.wrapping_add(1);
                p.beat_due = now.saturating_add(third);
                Ok(())
            }
            Ok(OpOutput::Cas { .. }) => {
                p.revoked();
                Err(Error::Timeout)
            }
            _ => Ok(()),
        }
    }

    /// Reads the client's lease block (its lease word, heartbeat and key
    /// words, one READ).
    pub(crate) fn read_lease_block(&mut self) {
        let cfg = &self.client.cfg;
        let offset = cfg.lease_block(self.client.id).unwrap_or(0);
        let len = cfg.lease_block_bytes() as u32;
        self.io.issue(Op::Read {
            addr: RemoteAddr::data(self.client.id.node, offset),
            len,
        });
    }

    /// Takes the share or asks for a newer generation: CASes the lease word
    /// from `seen` to `ask`.
    pub(crate) fn cas_lease_word(&mut self, seen: LeaseWord, ask: LeaseWord) {
        let offset = self.client.cfg.lease_block(self.client.id).unwrap_or(0);
        self.io.issue(Op::Cas {
            addr: RemoteAddr::data(self.client.id.node, offset),
            expect: seen.encode(),
            new: ask.encode(),
        });
    }
}
