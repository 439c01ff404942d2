//! Test-only fault switches: deliberately broken protocol variants.
//!
//! Every checker must be shown to catch a broken protocol. These switches break
//! one rule each; they are off by default and exist only so tests can assert
//! that the checkers notice. Do not turn them on in a deployment.

/// Broken protocol variants (all off by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Faults {
    /// PUT skips its reverse pass (verification of the other candidates).
    pub skip_put_verify: bool,
    /// MIGRATE does not roll back its locked source when installing the copy
    /// at the destination fails.
    pub skip_migrate_rollback: bool,
    /// The owner flips its own entry's state with a CPU store instead of a NIC CAS.
    pub cpu_state_flip: bool,
    /// The allocator reuses unlinked entries without waiting for expiration.
    pub reuse_before_expiry: bool,
    /// GET answers not-found without its reverse pass.
    pub skip_get_reverse_pass: bool,
    /// The client ignores its own deadline (an owner that overruns).
    pub ignore_deadline: bool,
    /// Hole 1 of the protocol review, reinstated: MIGRATE posts its install
    /// CAS checking only its deadline (not the margin), and recovery restores
    /// a copy's source and destination in one round without fencing the
    /// destination (a late install then lands after the reclaim), restoring
    /// an empty previous version exactly.
    pub unfenced_migrate_install: bool,
    /// Hole 2, reinstated: a PUT/DELETE scan extends cached entries from the
    /// time its completions are processed, not the time its READs were posted.
    pub cache_time_from_completion: bool,
    /// Hole 2 on a GET's hit path: a cache hit is extended (and re-stamped)
    /// from the time the index entry's completion is processed, not the time
    /// its READ was posted.
    pub get_hit_time_from_completion: bool,
    /// Hole 2 on a GET's insert after a whole-entry read: the entry is cached
    /// valid from the time the data table entry's completion is processed,
    /// not the time the index entry's READ was posted.
    pub get_insert_time_from_completion: bool,
    /// Hole 2 on a GET's insert after its value read (`multiple_reads`): the
    /// entry is cached valid from the time the value's completion is
    /// processed, not the time the index entry's READ was posted.
    pub get_value_insert_time_from_completion: bool,
    /// Hole 3, reinstated: errors at or after the commit CAS are returned as
    /// they come (a fabric timeout as the retryable `Timeout`), so a committed
    /// write can be retried and applied twice.
    pub errors_after_commit_retryable: bool,
    /// Hole 4, reinstated: a MIGRATE that meets a committed copy from its
    /// destination side answers `Conflict` instead of helping, and a
    /// `Conflict` from one MIGRATE source ends the whole PUT.
    pub conflict_ends_put: bool,
    /// The pitfall "rollback target is not the read fallback": recovery
    /// restores a MIGRATE copy's destination to the copy's previous version
    /// instead of emptying it (two entries then name one entry of the key).
    pub rollback_destination_to_previous: bool,
    /// Issue 24's hole 1, reinstated: a fence CAS that finds any present
    /// word ends the fence, even the copy itself (a late install that landed
    /// between two fence tries), so the copy stays linked at its destination
    /// while the reclaimer marks it for recycling.
    pub fence_stops_at_present_word: bool,
    /// Issue 24 hole 2, reinstated: the `Client`'s driver posts each
    /// machine's own request ids (every attempt and operation numbers its
    /// requests from 0) and hands every completion to the running machine,
    /// so a completion that arrives after its attempt gave the round up
    /// answers the next machine's request of the same number (a stale READ
    /// returned as fresh, and cached under the new index word).
    pub machine_local_request_ids: bool,
    /// Issue 24 hole 3, reinstated: a breadth-first MIGRATE search that the
    /// attempt cannot afford before its deadline (priced from the rounds it
    /// measured) ends the PUT in `TableFull`, which is never retried,
    /// instead of the retryable `Timeout`.
    pub unaffordable_search_table_full: bool,
    /// Issue 39, reinstated: a breadth-first MIGRATE search keeps the first
    /// 256 alternatives of a wider level (what one round reads) and drops
    /// the rest without saying so, instead of reading the level in several
    /// rounds: a chain among the dropped ones ends the PUT in `TableFull`,
    /// which is never retried (and a retry would drop the same entries).
    pub capped_search_table_full: bool,
    /// A PUT or DELETE never marks the previous version it replaced for
    /// recycling after its commit, and does not count it as leaked: the entry
    /// is lost silently (only the simulator's data-table audit can tell).
    pub skip_recycle_mark: bool,
    /// A remote recycle mark is a plain WRITE of the marked word, as before
    /// issue 24, instead of a CAS that expects the entry's unmarked word of
    /// the incarnation the marker read: a duplicated or late mark then lands
    /// on whatever the entry holds by then, a reused and linked entry
    /// included (safe only while every WRITE lands within A2's bound).
    pub blind_recycle_mark: bool,
    /// A remote recycle mark is written as the owner's own (not marked
    /// remote), so the owner reuses the entry once the marker's stamp plus
    /// the skew allowance passes by its own clock, as before: safe only while
    /// the two clocks differ by at most `clock_skew` (A1).
    pub trust_remote_mark_stamp: bool,
    /// The MIGRATE fence's seal before the swarm's case 48,969: the copy's
    /// emptied word, or the never-used word when the destination holds that
    /// already. Two fencers of one copy (its owner and a client that met it
    /// aborted) then flip the destination between the two, and the second
    /// one hands a pending install that expects the never-used word its
    /// word back.
    pub fence_seal_flips: bool,
    /// The MIGRATE fence's seal before the swarm's case 26,582 (found on
    /// 2026-11-30): over a word that does not name the copy's entry, the
    /// copy's emptied word. Two fencers of one copy that each find another
    /// word (the first an older empty word, the second a seal a fencer of
    /// another copy wrote over the first one's) both write that same word,
    /// so the destination returns to a word it held before, and a pending
    /// install of the other copy that read it then lands and links that
    /// copy, aborted and marked (I4).
    pub fence_seals_with_copy_word: bool,
    /// Issue 39's incarnation tags switched off: every reuse of a data
    /// table entry carries incarnation 0, so its index and state words
    /// repeat those of its earlier incarnations, and a CAS that lands after
    /// its entry was reused can match them (A2′, as before the tags).
    pub ignore_incarnations: bool,
    /// Associative buckets' rule of one-entry buckets carried over: a PUT's
    /// verification re-reads only the buckets other than its target's, so a
    /// second entry of the key installed in another slot of the target's own
    /// bucket goes unseen.
    pub verify_other_buckets_only: bool,
    /// Value classes' offset rule forgotten in one place (issue 41): a
    /// recycle mark addresses its entry with the main class's geometry
    /// (entry number times the main entry size, the rule before classes),
    /// so the mark of an entry of a smaller class lands on another entry,
    /// which may be linked.
    pub mark_by_main_class_offset: bool,
    /// An update skips its verification even when the key's holder is a
    /// committed MIGRATE copy linked at its destination, as updates of any
    /// other holder do: a scan that read the copy's source before the key
    /// was written there and its destination after the copy committed does
    /// not see the source still linked, and the update commits while the
    /// source still names the copy (two committed versions of the key).
    pub skip_copy_update_verify: bool,
    /// A PUT whose search finds no chain answers `TableFull` on its scan
    /// alone, without re-reading the key's candidates: a scan that
    /// straddled a MIGRATE of the key (one bucket read before the copy
    /// landed, the other after the source was cleared) refuses an update
    /// of a present key as an insert into a full table (the swarm's case
    /// 30,014).
    pub table_full_uncertified: bool,
    /// A client without storage writes its entry whole with one WRITE, its
    /// state and recycle words included, instead of setting those two by
    /// CAS (docs/protocol.md §2.4): a duplicate of the WRITE that lands
    /// after the commit turns the committed entry back into a writing one.
    pub pure_state_by_write: bool,
    /// A client without storage writes its entries with plain WRITEs and
    /// CASes, not through its windows: a request of an earlier generation
    /// that lands late changes an entry reused in a later one.
    pub pure_unwindowed: bool,
    /// A client takes no growth seal for a sign that its view of the index
    /// is behind (docs/protocol.md §2.5): it skips a sealed entry as an
    /// empty one, so a key moved into a generation it does not know of is
    /// answered "not found".
    pub ignore_growth_seals: bool,
    /// A growth's move finishes by emptying its source, as a move within one
    /// generation does, instead of sealing it: a client whose view is
    /// behind then finds nothing of the moved key, and may insert it again
    /// in the old generation.
    pub growth_move_empties_source: bool,
    /// An insert while the index grows links the key in the new generation
    /// without first sealing one of its old entries: a client whose view is
    /// behind reads only the old ones, finds no seal, and answers "not
    /// found" for a key that is there.
    pub grow_insert_unsealed: bool,
    /// Writes do not help a growth along: only `Client::grow` sweeps, so a
    /// growth whose sweeper crashed never ends (writes still work, through
    /// both generations).
    pub skip_growth_help: bool,
    /// A step of the sweep moves the directory's cursor past the chunks it
    /// read ahead without checking that they are sealed: a growth can end
    /// with a key still linked in an old generation, which no one reads
    /// again.
    pub growth_cursor_unchecked: bool,
    /// A client without storage advances its heartbeat only in its writes'
    /// data rounds (as before issue 41's renewal), never at the start of an
    /// operation whose beat is overdue: a client that only reads for the
    /// lease term loses its share while it runs.
    pub pure_beats_only_on_writes: bool,
    /// A client without storage that finds its share free takes it in the
    /// generation it has rather than asking for a newer one, and so adopts
    /// the keys of the client that gave it back, still good: that client's
    /// late WRITEs land on the entries the new holder reuses.
    pub take_without_new_generation: bool,
}

/// A fault switch name that [`Faults::set`] does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown fault switch {0:?} (known: {names})", names = Faults::NAMES.join(", "))]
pub struct UnknownFault(pub String);

impl Faults {
    /// Every switch, by its command-line name (kebab case of the field).
    pub const NAMES: [&'static str; 37] = [
        "skip-put-verify",
        "skip-migrate-rollback",
        "cpu-state-flip",
        "reuse-before-expiry",
        "skip-get-reverse-pass",
        "ignore-deadline",
        "unfenced-migrate-install",
        "cache-time-from-completion",
        "get-hit-time-from-completion",
        "get-insert-time-from-completion",
        "get-value-insert-time-from-completion",
        "errors-after-commit-retryable",
        "conflict-ends-put",
        "rollback-destination-to-previous",
        "fence-stops-at-present-word",
        "machine-local-request-ids",
        "unaffordable-search-table-full",
        "capped-search-table-full",
        "skip-recycle-mark",
        "blind-recycle-mark",
        "trust-remote-mark-stamp",
        "fence-seal-flips",
        "fence-seals-with-copy-word",
        "ignore-incarnations",
        "verify-other-buckets-only",
        "mark-by-main-class-offset",
        "skip-copy-update-verify",
        "table-full-uncertified",
        "pure-state-by-write",
        "pure-unwindowed",
        "ignore-growth-seals",
        "growth-move-empties-source",
        "grow-insert-unsealed",
        "skip-growth-help",
        "growth-cursor-unchecked",
        "pure-beats-only-on-writes",
        "take-without-new-generation",
    ];

    /// Turns on the switch called `name` (one of [`Faults::NAMES`]).
    pub fn set(&mut self, name: &str) -> Result<(), UnknownFault> {
        let switch = match name {
            "skip-put-verify" => &mut self.skip_put_verify,
            "skip-migrate-rollback" => &mut self.skip_migrate_rollback,
            "cpu-state-flip" => &mut self.cpu_state_flip,
            "reuse-before-expiry" => &mut self.reuse_before_expiry,
            "skip-get-reverse-pass" => &mut self.skip_get_reverse_pass,
            "ignore-deadline" => &mut self.ignore_deadline,
            "unfenced-migrate-install" => &mut self.unfenced_migrate_install,
            "cache-time-from-completion" => &mut self.cache_time_from_completion,
            "get-hit-time-from-completion" => &mut self.get_hit_time_from_completion,
            "get-insert-time-from-completion" => &mut self.get_insert_time_from_completion,
            "get-value-insert-time-from-completion" => {
                &mut self.get_value_insert_time_from_completion
            }
            "errors-after-commit-retryable" => &mut self.errors_after_commit_retryable,
            "conflict-ends-put" => &mut self.conflict_ends_put,
            "rollback-destination-to-previous" => &mut self.rollback_destination_to_previous,
            "fence-stops-at-present-word" => &mut self.fence_stops_at_present_word,
            "machine-local-request-ids" => &mut self.machine_local_request_ids,
            "unaffordable-search-table-full" => &mut self.unaffordable_search_table_full,
            "capped-search-table-full" => &mut self.capped_search_table_full,
            "skip-recycle-mark" => &mut self.skip_recycle_mark,
            "blind-recycle-mark" => &mut self.blind_recycle_mark,
            "trust-remote-mark-stamp" => &mut self.trust_remote_mark_stamp,
            "fence-seal-flips" => &mut self.fence_seal_flips,
            "fence-seals-with-copy-word" => &mut self.fence_seals_with_copy_word,
            "ignore-incarnations" => &mut self.ignore_incarnations,
            "verify-other-buckets-only" => &mut self.verify_other_buckets_only,
            "mark-by-main-class-offset" => &mut self.mark_by_main_class_offset,
            "skip-copy-update-verify" => &mut self.skip_copy_update_verify,
            "table-full-uncertified" => &mut self.table_full_uncertified,
            "pure-state-by-write" => &mut self.pure_state_by_write,
            "pure-unwindowed" => &mut self.pure_unwindowed,
            "ignore-growth-seals" => &mut self.ignore_growth_seals,
            "growth-move-empties-source" => &mut self.growth_move_empties_source,
            "grow-insert-unsealed" => &mut self.grow_insert_unsealed,
            "skip-growth-help" => &mut self.skip_growth_help,
            "growth-cursor-unchecked" => &mut self.growth_cursor_unchecked,
            "pure-beats-only-on-writes" => &mut self.pure_beats_only_on_writes,
            "take-without-new-generation" => &mut self.take_without_new_generation,
            other => return Err(UnknownFault(other.to_string())),
        };
        *switch = true;
        Ok(())
    }

    /// The variant with the named switches on.
    pub fn named<S: AsRef<str>>(names: &[S]) -> Result<Faults, UnknownFault> {
        let mut f = Faults::default();
        for n in names {
            f.set(n.as_ref())?;
        }
        Ok(f)
    }

    /// Whether a switch that is on breaks a rule the incarnation tags cover:
    /// its failures are a reused entry met through a word of an earlier
    /// incarnation (a reuse before T, a cache entry kept or stamped past T,
    /// a remote mark's stamp trusted across clocks). With the tags such a
    /// variant is harmless short of their wrap (docs/protocol.md §4), so a
    /// checker catches it with the tags off too
    /// ([`Faults::for_catching`]).
    pub fn breaks_a_rule_the_tags_cover(&self) -> bool {
        self.reuse_before_expiry
            || self.cache_time_from_completion
            || self.get_hit_time_from_completion
            || self.get_insert_time_from_completion
            || self.get_value_insert_time_from_completion
            || self.trust_remote_mark_stamp
    }

    /// This variant as a checker hunts it: with the incarnation tags off
    /// too when it breaks a rule they cover
    /// ([`Faults::breaks_a_rule_the_tags_cover`]), where the clock rules
    /// it breaks are the only cover, as they are again once an entry's
    /// incarnations wrap.
    pub fn for_catching(mut self) -> Faults {
        self.ignore_incarnations |= self.breaks_a_rule_the_tags_cover();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the six switches whose failures the tags cover are hunted with
    /// the tags off; every other switch is hunted as it is.
    #[test]
    fn only_switches_the_tags_cover_are_caught_with_the_tags_off() {
        let covered = [
            "reuse-before-expiry",
            "cache-time-from-completion",
            "get-hit-time-from-completion",
            "get-insert-time-from-completion",
            "get-value-insert-time-from-completion",
            "trust-remote-mark-stamp",
        ];
        for name in Faults::NAMES {
            let f = Faults::named(&[name]).unwrap().for_catching();
            assert_eq!(
                f.ignore_incarnations,
                covered.contains(&name) || name == "ignore-incarnations",
                "{name}"
            );
        }
    }

    #[test]
    fn every_name_turns_on_exactly_one_distinct_switch() {
        let mut seen = Vec::new();
        for name in Faults::NAMES {
            let f = Faults::named(&[name]).unwrap();
            assert_ne!(f, Faults::default(), "{name}");
            assert!(!seen.contains(&f), "{name} repeats a switch");
            seen.push(f);
        }
        assert!(Faults::named(&["no-such-switch"]).is_err());
    }
}
