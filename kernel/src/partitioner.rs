//! Which partition of `__mirror_state` holds a key: Kafka's `murmur2` hash, made positive,
//! modulo the partition count (`docs/design.md`, section 4).
//!
//! The bytes hashed are not the encoded record key of [`crate::records`] but the key's fields
//! concatenated: the UTF-8 mirror name, the 16 topic-id bytes, then the partition as 4 bytes
//! big-endian ([`mirror_state_key_bytes`]). Both record types of a mirrored partition
//! (`MirrorPartitionStateKey` and `LastMirroredEpochsKey`) therefore live in the same
//! `__mirror_state` partition, and so with the same coordinator.

use crate::types::MirrorPartition;

/// The seed of Kafka's `Utils.murmur2`.
pub const MURMUR2_SEED: u32 = 0x9747_b28c;

/// `__mirror_state` was given no partitions, so no partition can hold a key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, thiserror::Error)]
#[error("__mirror_state has no partitions; the partition count must be at least 1")]
pub struct NoPartitions;

/// Kafka's `Utils.murmur2(byte[])`: 32-bit MurmurHash2 with seed [`MURMUR2_SEED`], as the Java
/// `int` Kafka returns.
///
/// Like Kafka, the body reads each 4-byte block little-endian; the 1 to 3 tail bytes are folded in
/// (third byte `<< 16`, second `<< 8`, first) and multiplied by `m` only when there is a tail;
/// the final mix is `h ^= h >>> 13; h *= m; h ^= h >>> 15` with logical (unsigned) shifts.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    // Java arrays are at most i32::MAX long, so Kafka's `int length` never wraps; a longer
    // slice wraps here rather than panicking.
    let length = data.len() as u32;
    let mut h = MURMUR2_SEED ^ length;

    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }

    let tail = blocks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if let Some(&first) = tail.first() {
        h ^= u32::from(first);
        h = h.wrapping_mul(M);
    }

    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (`n & 0x7fffffff`), unlike `abs` mapping
/// `i32::MIN` to 0 and every other negative number to a different non-negative one.
pub const fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The bytes hashed to place `key`: UTF-8 mirror name, 16 topic-id bytes, partition `int32`
/// big-endian.
pub fn mirror_state_key_bytes(key: &MirrorPartition) -> Vec<u8> {
    let name = key.mirror.as_str().as_bytes();
    let mut bytes = Vec::with_capacity(name.len() + 16 + 4);
    bytes.extend_from_slice(name);
    bytes.extend_from_slice(&key.topic_id.0);
    bytes.extend_from_slice(&key.partition.to_be_bytes());
    bytes
}

/// The partition of `__mirror_state` (of `num_partitions`) that holds `key`'s records:
/// `to_positive(murmur2(key bytes)) % num_partitions`, Kafka's default key partitioning.
pub fn mirror_state_partition(
    key: &MirrorPartition,
    num_partitions: u32,
) -> Result<u32, NoPartitions> {
    if num_partitions == 0 {
        return Err(NoPartitions);
    }
    // `to_positive` never returns a negative number, so the conversion is lossless.
    let hash = to_positive(murmur2(&mirror_state_key_bytes(key))).unsigned_abs();
    Ok(hash % num_partitions)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::types::{MirrorName, TopicId};

    /// The expected values of Apache Kafka's `UtilsTest.testMurmur2`
    /// (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, apache/kafka commit
    /// f55581dc73953c3509a4702433aeeeddc2970779): six inputs covering every tail length.
    #[test]
    fn murmur2_matches_kafka_utils_test() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (input, expected) in cases {
            assert_eq!(
                murmur2(input),
                expected,
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }

    /// Further values, computed with a transcription of Kafka's Java `Utils.murmur2` run on a JVM
    /// (Java `int` arithmetic), for the lengths the Kafka test does not cover.
    #[test]
    fn murmur2_edge_lengths() {
        let cases: [(&[u8], i32); 5] = [
            (b"", 275_646_681),
            (b"a", -1_563_381_124),
            (b"abcd", -1_323_649_548),
            (b"abcdefg", -346_467_175),
            (&[0xff, 0x80, 0x7f, 0x00, 0xfe], -1_958_495_739),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input), expected, "{input:?}");
        }
    }

    #[test]
    fn to_positive_clears_only_the_sign_bit() {
        assert_eq!(to_positive(0), 0);
        assert_eq!(to_positive(5), 5);
        assert_eq!(to_positive(-1), i32::MAX);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-973_932_308), 1_173_551_340);
    }

    fn key(mirror: &str, topic: u64, partition: i32) -> MirrorPartition {
        MirrorPartition {
            mirror: MirrorName::new(mirror).unwrap(),
            topic_id: TopicId::from_u64(topic),
            partition,
        }
    }

    #[test]
    fn key_bytes_are_name_topic_id_partition() {
        let bytes = mirror_state_key_bytes(&key("ab", 0x0102, 0x0a0b0c0d));
        let mut expected = b"ab".to_vec();
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
        expected.extend_from_slice(&[0x0a, 0x0b, 0x0c, 0x0d]);
        assert_eq!(bytes, expected);
    }

    /// Golden placements (hash and partition) computed with the JVM transcription mentioned above.
    #[test]
    fn mirror_state_partition_golden_vectors() {
        let cases = [
            (key("east", 1, 0), 50, 1_638_038_648, 48),
            (key("east", 1, 1), 50, 1_308_501_214, 14),
            (key("east", 1, 2), 50, -705_901_001, 47),
            (key("east", 1, 3), 50, -648_462_887, 11),
            (key("east", 2, 0), 50, 2_063_723_980, 30),
            (key("west-2.prod", 0xdead_beef, 17), 50, 686_691_214, 14),
            (key("west-2.prod", 0xdead_beef, 17), 7, 686_691_214, 6),
            (key("b", 7, 4), 12, -1_642_202_005, 7),
            (key("m", 0, -1), 3, 412_329_570, 0),
        ];
        for (k, n, hash, partition) in cases {
            assert_eq!(murmur2(&mirror_state_key_bytes(&k)), hash, "{k:?}");
            assert_eq!(mirror_state_partition(&k, n), Ok(partition), "{k:?} of {n}");
        }
    }

    #[test]
    fn zero_partitions_is_an_error() {
        assert_eq!(
            mirror_state_partition(&key("east", 1, 0), 0),
            Err(NoPartitions)
        );
    }

    proptest! {
        #[test]
        fn partition_is_in_range_and_one_partition_is_zero(
            name in "[a-z]{1,12}",
            topic in any::<u64>(),
            index in any::<i32>(),
            n in 1u32..10_000,
        ) {
            let k = key(&name, topic, index);
            let p = mirror_state_partition(&k, n).unwrap();
            prop_assert!(p < n);
            prop_assert_eq!(mirror_state_partition(&k, 1), Ok(0));
        }
    }
}
