//! FNV-1a for the planner's hash maps.
//!
//! The maps it serves are keyed by names and ids a plan holds (PVE key
//! names, object refs, node and guest names), looked up and never listed:
//! a few bytes each, hashed thousands of times per plan. SipHash's
//! setup cost dominated there (1.6% of planning 10,000 guests), and its
//! resistance to chosen collisions buys nothing: a map's keys come from
//! the repository or from ProxOps itself, and a lookup never inserts.

use std::hash::{BuildHasher, Hasher};

/// Builds [`FnvHasher`]s; the `S` of a `HashMap<K, V, Fnv>`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Fnv;

impl BuildHasher for Fnv {
    type Hasher = FnvHasher;
    fn build_hasher(&self) -> FnvHasher {
        FnvHasher(0xcbf2_9ce4_8422_2325)
    }
}

/// 64-bit FNV-1a.
#[derive(Debug, Clone, Copy)]
pub struct FnvHasher(u64);

impl Hasher for FnvHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A hash map with [`Fnv`].
pub type FnvMap<K, V> = std::collections::HashMap<K, V, Fnv>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_1a_gives_the_published_values() {
        // The FNV-1a 64-bit test vectors (the empty string, "a", "foobar").
        let raw = |s: &str| {
            let mut h = Fnv.build_hasher();
            h.write(s.as_bytes());
            h.finish()
        };
        assert_eq!(raw(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(raw("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(raw("foobar"), 0x8594_4171_f739_67e8);
        assert_ne!(raw("ab"), raw("ba"));
    }
}
