//! Copy-on-write sharing with a cached fingerprint, for the parts of a world that most steps
//! leave alone.
//!
//! The checker clones a world for every successor and hashes every successor to fingerprint
//! it. A step usually changes one cluster, and within it rarely the coordinator or the
//! controller's catalogue: a [`Shared`] part is not copied when the world is cloned, and its
//! hash, computed once per version, is reused by every world that holds it. A part may also
//! carry a *view* (`V`: lazily derived values, e.g. a cluster's stored mirror state), which
//! every world holding the version shares and which is reset with the hash when the part
//! changes.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock};

/// A value shared by the worlds that hold it until one of them changes it (copy on write),
/// with its hash cached. Reading goes through [`Deref`]; writing through [`DerefMut`], which
/// copies a shared value first and forgets the cached hash.
pub struct Shared<T, V = ()>(Arc<Cached<T, V>>);

/// A value, its cached digest and its cached view.
struct Cached<T, V> {
    value: T,
    digest: OnceLock<u64>,
    view: V,
}

impl<T: Clone, V: Clone> Clone for Cached<T, V> {
    fn clone(&self) -> Self {
        Cached {
            value: self.value.clone(),
            digest: self.digest.clone(),
            view: self.view.clone(),
        }
    }
}

/// The seeds of the digest: fixed, so fingerprints do not depend on the process.
const DIGEST_SEEDS: [u64; 4] = [
    0x6b6d_6972_726f_7231,
    0x636c_7573_7465_7273,
    0x0123_4567_89ab_cdef,
    0xfedc_ba98_7654_3210,
];

impl<T, V: Default> Shared<T, V> {
    /// Shares `value`.
    pub fn new(value: T) -> Self {
        Shared(Arc::new(Cached {
            value,
            digest: OnceLock::new(),
            view: V::default(),
        }))
    }
}

impl<T, V> Shared<T, V> {
    /// The view of this version of the value (reset to `V::default()` by every change). What it
    /// caches must be derived from the value alone.
    pub fn view(&self) -> &V {
        &self.0.view
    }
}

impl<T: Hash, V> Shared<T, V> {
    /// A 64-bit hash of the value, computed once per version of it.
    pub fn digest(&self) -> u64 {
        *self.0.digest.get_or_init(|| {
            let [a, b, c, d] = DIGEST_SEEDS;
            ahash::RandomState::with_seeds(a, b, c, d).hash_one(&self.0.value)
        })
    }
}

impl<T, V> Clone for Shared<T, V> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<T, V> Deref for Shared<T, V> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0.value
    }
}

impl<T: Clone, V: Clone + Default> DerefMut for Shared<T, V> {
    fn deref_mut(&mut self) -> &mut T {
        let cached = Arc::make_mut(&mut self.0);
        cached.digest.take();
        cached.view = V::default();
        &mut cached.value
    }
}

impl<T: PartialEq, V> PartialEq for Shared<T, V> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.value == other.0.value
    }
}

/// Compares the shared value with a plain one.
impl<T: PartialEq, V> PartialEq<T> for Shared<T, V> {
    fn eq(&self, other: &T) -> bool {
        self.0.value == *other
    }
}

impl<T: Eq, V> Eq for Shared<T, V> {}

/// Hashes the [digest](Shared::digest): equal values have equal digests.
impl<T: Hash, V> Hash for Shared<T, V> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.digest());
    }
}

impl<T: fmt::Debug, V> fmt::Debug for Shared<T, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.value.fmt(f)
    }
}
