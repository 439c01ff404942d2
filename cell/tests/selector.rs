//! The locality selector learns from range scans too: a client that only
//! scans gets server-side latency samples from its server-side scan parts
//! (each counted as the meganode search it contains), so it compares the
//! two methods and searches on its own as well. Before, scans recorded no
//! server-side sample, the selector (which tries the server while it has
//! none) never learned l_s, and a scan-only workload stayed on the servers.

mod common;

use common::*;
use nessie_cell::SearchMode;
use nessie_protocol::rng::xorshift64;

#[test]
fn a_scan_only_workload_teaches_the_selector_both_methods() {
    let d = start(tiny());
    let mut writer = client(&d, 0, 0, SearchMode::ServerOnly);
    for i in 0..300 {
        writer.put(&key(i), b"value").unwrap();
    }
    let mut c = client(&d, 1, 0, SearchMode::Selector);
    let mut s = 7u64;
    for _ in 0..600 {
        let from = key(xorshift64(&mut s) % 300);
        let got = c.scan(&from, None, 10).unwrap();
        assert!(!got.is_empty(), "a scan from {from:?} found nothing");
    }
    let stats = c.stats();
    assert!(
        stats.client_searches > 0,
        "the selector never searched on its own: {stats:?}"
    );
    let learned = c.with_core(|core| {
        (0..3u16).any(|n| {
            core.selector
                .server(nessie_protocol::NodeId(n))
                .is_some_and(|v| v.ls.mean().is_some() && v.lr.mean().is_some())
        })
    });
    assert!(learned, "no server has both l_s and l_r samples");
}
