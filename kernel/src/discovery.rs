//! Discovery: which of the topics a mirror's selection matches at the source go into the mirror
//! now.
//!
//! KIP-1279's `AddTopicsToMirror` names topics. The KIP authors' prototype also keeps include and
//! exclude patterns per mirror and applies them again on every refresh of the source's metadata,
//! so a topic created at the source later is mirrored too. [`discover`] is that application, as
//! a decision on the destination's [`TopicCatalogue`]: given the names the selection matches
//! (the executor matches the patterns; this module decides), the topics to add with one
//! `AddTopicsToMirror`, and the ones left out with the reason.
//!
//! **Discovery never fails back.** A topic whose `mirror.name` says it left a mirror
//! (`<mirror>.removed`: failed over, or failing over) is left out whatever the selection says:
//! adding it would truncate the partition to the source's last mirrored epoch (all of it, against
//! a source that keeps none) and drop every record written locally since the failover. Only the
//! operator's explicit failback ([`discover`] with `failback`) puts such a topic back in a
//! mirror; the controller ([`crate::controller`]) still checks that every partition is STOPPED.
//!
//! ```
//! use kmirror_kernel::controller::{TopicCatalogue, TopicInfo};
//! use kmirror_kernel::discovery::{discover, Left};
//! use kmirror_kernel::types::{MirrorName, TopicId};
//!
//! let east = MirrorName::new("east").unwrap();
//! let mut stopped = TopicInfo::new(TopicId::from_u64(1), 3);
//! stopped.mirror_name = Some("east.removed".into());
//! let catalogue = TopicCatalogue::new().with_mirror(east.clone()).with_topic("orders", stopped);
//!
//! // A re-run of the same selection adds the new topic and leaves the failed-over one alone.
//! let found = discover(&catalogue, &east, ["orders", "pay"], false, None);
//! assert_eq!(found.add, vec!["pay".to_string()]);
//! assert_eq!(found.left["orders"], Left::FailedOver);
//!
//! // The operator's failback puts it back.
//! let found = discover(&catalogue, &east, ["orders"], true, None);
//! assert_eq!(found.failback, vec!["orders".to_string()]);
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::controller::TopicCatalogue;
use crate::desired::DesiredState;
use crate::mutant::{self, Mutant};
use crate::types::MirrorName;

/// Why a matched topic is not added.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum Left {
    /// It left a mirror (`<mirror>.removed`): failed over, or failing over. Only an explicit
    /// failback adds it again.
    FailedOver,
    /// It is in another mirror (`<other>` or `<other>.paused`).
    OtherMirror(MirrorName),
    /// Its stored `mirror.name` does not parse (the value, for the operator).
    InvalidMirrorName(String),
}

/// What [`discover`] decided, each topic in name order.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct Discovery {
    /// Topics to add: not on the destination yet, or there and in no mirror.
    pub add: Vec<String>,
    /// Failed-over topics to add back (only when the failback was asked for).
    pub failback: Vec<String>,
    /// Topics already in the mirror (mirroring or paused): nothing to do.
    pub already: Vec<String>,
    /// Topics left out, with the reason.
    pub left: BTreeMap<String, Left>,
}

impl Discovery {
    /// The topics of the `AddTopicsToMirror` to send: [`Discovery::add`] and
    /// [`Discovery::failback`], in name order.
    pub fn request_topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self.add.iter().chain(&self.failback).cloned().collect();
        topics.sort();
        topics
    }
}

/// Decides which of `matched` (topic names the selection matches at the source) go into
/// `mirror` now, against the destination's `catalogue`: see the [module documentation](self).
/// `failback` is the operator's explicit failback of the matched failed-over topics.
pub fn discover<'a>(
    catalogue: &TopicCatalogue,
    mirror: &MirrorName,
    matched: impl IntoIterator<Item = &'a str>,
    failback: bool,
    mutant: Option<Mutant>,
) -> Discovery {
    let mut found = Discovery::default();
    let mut names: Vec<&str> = matched.into_iter().collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let desired = match catalogue.topic(name).map(|t| t.desired_state()) {
            None => DesiredState::NotMirrored,
            Some(Ok(desired)) => desired,
            Some(Err(_)) => {
                let raw = catalogue
                    .topic(name)
                    .and_then(|t| t.mirror_name.clone())
                    .unwrap_or_default();
                found
                    .left
                    .insert(name.to_owned(), Left::InvalidMirrorName(raw));
                continue;
            }
        };
        match desired {
            DesiredState::NotMirrored => found.add.push(name.to_owned()),
            DesiredState::Mirror(m) | DesiredState::Pause(m) if &m == mirror => {
                found.already.push(name.to_owned())
            }
            DesiredState::Mirror(m) | DesiredState::Pause(m) => {
                found.left.insert(name.to_owned(), Left::OtherMirror(m));
            }
            DesiredState::Stop(_)
                if failback || mutant::active(mutant, Mutant::ImplicitFailback) =>
            {
                found.failback.push(name.to_owned())
            }
            DesiredState::Stop(_) => {
                found.left.insert(name.to_owned(), Left::FailedOver);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::TopicInfo;
    use crate::types::TopicId;

    fn catalogue(topics: &[(&str, Option<&str>)]) -> TopicCatalogue {
        let mut c = TopicCatalogue::new().with_mirror(MirrorName::new("east").unwrap());
        for (i, (name, mirror_name)) in topics.iter().enumerate() {
            let mut info = TopicInfo::new(TopicId::from_u64(i as u64 + 1), 2);
            info.mirror_name = mirror_name.map(str::to_owned);
            c.insert_topic(*name, info);
        }
        c
    }

    #[test]
    fn every_desired_state_has_its_answer() {
        let east = MirrorName::new("east").unwrap();
        let c = catalogue(&[
            ("a", None),
            ("b", Some("east")),
            ("c", Some("east.paused")),
            ("d", Some("west")),
            ("e", Some("east.removed")),
            ("f", Some("west.removed")),
            ("g", Some("bad name!")),
        ]);
        let names = ["new", "a", "b", "c", "d", "e", "f", "g", "a"];
        let found = discover(&c, &east, names, false, None);
        assert_eq!(found.add, vec!["a", "new"]);
        assert!(found.failback.is_empty());
        assert_eq!(found.already, vec!["b", "c"]);
        let west = MirrorName::new("west").unwrap();
        let left: Vec<(&str, Left)> = vec![
            ("d", Left::OtherMirror(west)),
            ("e", Left::FailedOver),
            ("f", Left::FailedOver),
            ("g", Left::InvalidMirrorName("bad name!".into())),
        ];
        assert_eq!(
            found.left,
            left.into_iter().map(|(n, l)| (n.to_owned(), l)).collect()
        );
        assert_eq!(found.request_topics(), vec!["a", "new"]);

        let found = discover(&c, &east, names, true, None);
        assert_eq!(found.failback, vec!["e", "f"]);
        assert_eq!(found.request_topics(), vec!["a", "e", "f", "new"]);
        assert!(!found.left.contains_key("e"));
    }
}
