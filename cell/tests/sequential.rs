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
