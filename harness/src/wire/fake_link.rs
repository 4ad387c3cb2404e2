//! The fake cluster behind simulated network links (tests only): each broker gets a loopback
//! proxy with a delay ([`kmirror_testsupport::link::Link`]) and advertises the proxy's address
//! in Metadata, so a client that follows the metadata stays behind the link.

use std::time::Duration;

use kmirror_testsupport::link::{Link, LinkOptions};

use super::fake_broker::FakeCluster;

/// Puts every broker of `fake` behind a link delaying each direction by `one_way_delay`; from
/// then on [`FakeCluster::address`] and the Metadata answers name the links. The links live as
/// long as what is returned.
pub(crate) fn behind_links(fake: &FakeCluster, one_way_delay: Duration) -> Vec<Link> {
    let mut state = fake.state();
    state
        .brokers
        .iter_mut()
        .map(|(_, address)| {
            let upstream = address.parse().expect("a fake broker's address");
            let link = Link::start(
                upstream,
                LinkOptions {
                    one_way_delay,
                    bandwidth_bytes_per_sec: None,
                },
            )
            .expect("link");
            *address = link.address().to_string();
            link
        })
        .collect()
}
