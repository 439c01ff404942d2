//! One client at a time: Cell agrees with a `BTreeMap` (gets, puts, deletes,
//! range scans) through node and meganode splits, in every search mode.

mod common;

use common::*;
use nessie_cell::SearchMode;
use std::time::Duration;

fn model_run(mode: SearchMode, seed: u64) {
    let d = start(tiny());
    let mut c = client(&d, 0, 0, mode);
    let model = against_model(&mut c, 3000, 400, seed);
    assert!(d.wait_idle(Duration::from_secs(10)));
    for (k, v) in &model {
        assert_eq!(c.get(k).unwrap().as_ref(), Some(v), "final get {k:?}");
    }
    let shape = d.shape();
    assert!(shape.meganode_splits >= 2, "{shape:?}");
    assert!(d.server_errors().is_empty(), "{:?}", d.server_errors());
}

#[test]
fn server_side_agrees_with_a_map_through_meganode_splits() {
    model_run(SearchMode::ServerOnly, 7);
}

#[test]
fn client_side_agrees_with_a_map_through_meganode_splits() {
    model_run(SearchMode::ClientOnly, 11);
}

#[test]
fn the_selector_agrees_with_a_map_through_meganode_splits() {
    model_run(SearchMode::Selector, 13);
}

/// Cell's range scans through the one operation vocabulary
/// (`KvClient::call`): a scan answers its entries, and one asking for
/// nothing or for more than a scan page is refused before anything is sent.
#[test]
fn scans_through_the_shared_vocabulary_and_their_limits() {
    use nessie_protocol::{Error, KvClient, OpStats, Request, Response};
    let d = start(tiny());
    let mut c = client(&d, 0, 0, SearchMode::Selector);
    for i in 0..5 {
        c.put(&key(i), b"v").unwrap();
    }
    assert!(KvClient::has_scans(&c));
    let from = key(1);
    let scan = |limit| Request::Scan {
        from: &from[..],
        to: None,
        limit,
    };
    match c.call(scan(2)) {
        Ok(Response::Scan(got)) => {
            let keys: Vec<Vec<u8>> = got.into_iter().map(|(k, _)| k).collect();
            assert_eq!(keys, vec![key(1), key(2)]);
        }
        other => panic!("a scan answers its entries: {other:?}"),
    }
    let page = tiny().scan_page as usize;
    for limit in [0, page + 1] {
        assert!(
            matches!(c.call(scan(limit)), Err(Error::Config(_))),
            "limit {limit}"
        );
        // One attempt, which sent nothing.
        let sent = OpStats {
            attempts: 0,
            ..KvClient::last_stats(&c)
        };
        assert_eq!(sent, OpStats::default(), "nothing sent for limit {limit}");
    }
}

/// Two live clients with one id would share request and response slots:
/// the second is refused with `ClientIdInUse` (before, Cell handed it out),
/// and the id is free again once the first is dropped.
#[test]
fn a_second_live_client_with_one_id_is_refused() {
    use nessie_protocol::{Error, KvClient};
    let d = start(tiny());
    let mut first = d.client(id(1, 0)).expect("a free id");
    match d.client(id(1, 0)) {
        Err(Error::ClientIdInUse(i)) => assert_eq!(i, id(1, 0)),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a second live client with one id"),
    }
    assert_eq!(KvClient::put(&mut first, &key(1), b"v"), Ok(false));
    drop(first);
    let mut again = d.client(id(1, 0)).expect("released on drop");
    assert_eq!(KvClient::get(&mut again, &key(1)), Ok(Some(b"v".to_vec())));
}
