//! The prototype's wire formats (`kmirror_kernel::proto_wire`) against the golden bytes Apache
//! Kafka 4.4.0 generated from the same schemas (`kernel/tests/golden/proto_wire/`; regenerated
//! and compared by `harness/tests/oracle_proto_wire.rs`): the Rust encoder writes exactly
//! Kafka's bytes, and decodes them back to the sample. Also the codec's refusals, each as
//! Kafka's generated code would refuse.

use std::collections::BTreeSet;
use std::path::PathBuf;

use kmirror_kernel::proto_wire::codec::{decode, encode};
use kmirror_kernel::proto_wire::conformance::CONFORMANCE;
use kmirror_kernel::proto_wire::framing;
use kmirror_kernel::proto_wire::golden;
use kmirror_kernel::proto_wire::pid_reset::MirrorPidResetRecord;
use kmirror_kernel::proto_wire::samples::{golden_cases, SAMPLE_TOPIC_ID};
use kmirror_kernel::proto_wire::state_records::{
    LastMirrorEpochsKey, LastMirrorEpochsValue, MirrorPartitionStateKey, MirrorPartitionStateValue,
    MirrorStateKey, MirrorStateValue,
};
use kmirror_kernel::proto_wire::topic_rpcs::{StartMirrorTopicsRequest, StopMirrorTopicsRequest};
use kmirror_kernel::proto_wire::{
    DecodeError, EncodeError, RawTaggedField, StructValue, Value, WireMessage, PROTOTYPE_MESSAGES,
};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/proto_wire")
}

fn field(name: &str) -> usize {
    CONFORMANCE
        .fields
        .iter()
        .position(|f| f.name == name)
        .expect("conformance field")
}

#[test]
fn golden_files_are_the_rust_encoders_bytes() {
    for case in golden_cases() {
        let path = golden_dir().join(case.file_name());
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (see docs/prototype-wire.md)", path.display()));
        let parsed = golden::parse(&text).expect("golden file parses");
        let names: Vec<&str> = parsed.iter().map(|(n, _)| n.as_str()).collect();
        let expected: Vec<&str> = case.samples.iter().map(|s| s.name).collect();
        assert_eq!(names, expected, "{}: samples", path.display());
        let mut rendered = Vec::new();
        for (sample, (_, kafka)) in case.samples.iter().zip(&parsed) {
            let what = format!("{} v{} {}", case.schema.name, case.version, sample.name);
            let ours = encode(case.schema, case.version, &sample.value)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(hex(&ours), hex(kafka), "{what}: Rust's bytes != Kafka's");
            let back =
                decode(case.schema, case.version, kafka).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(back, sample.value, "{what}: decoded");
            if let Some(typed_decode) = case.typed_decode {
                let typed = typed_decode(kafka, case.version).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(typed, sample.value, "{what}: typed decode");
            }
            rendered.push((sample.name, &sample.value, kafka.as_slice()));
        }
        // Headers and value lines are current too.
        assert_eq!(
            golden::render(case.schema, case.version, &rendered),
            text,
            "{}: header or value lines are stale",
            path.display()
        );
    }
}

#[test]
fn no_golden_file_is_left_over_and_every_message_is_covered() {
    let cases = golden_cases();
    let expected: BTreeSet<String> = cases.iter().map(|c| c.file_name()).collect();
    let present: BTreeSet<String> = std::fs::read_dir(golden_dir())
        .expect("golden dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(present, expected);
    for schema in PROTOTYPE_MESSAGES {
        schema.validate().expect("generator rules");
        let lo = schema.valid_versions.lowest().expect("versions");
        let hi = schema.valid_versions.highest().expect("versions");
        for version in lo..=hi {
            assert!(
                cases
                    .iter()
                    .any(|c| c.schema.name == schema.name && c.version == version),
                "{} v{version} has no golden case",
                schema.name
            );
        }
    }
    CONFORMANCE.validate().expect("generator rules");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn mirror_state_records_are_framed_like_kafkas_coordinator_records() {
    let key = MirrorPartitionStateKey {
        mirror_name: "east".into(),
        topic_id: SAMPLE_TOPIC_ID,
        partition: 7,
    };
    let bytes = MirrorStateKey::PartitionState(key.clone())
        .encode()
        .expect("encode");
    assert_eq!(&bytes[..2], &2i16.to_be_bytes(), "record type 2");
    assert_eq!(&bytes[2..], key.encode(0).expect("body").as_slice());
    // The body is the seed's key layout: int16 string, 16 bytes, int32.
    assert_eq!(&bytes[2..8], &[0, 4, b'e', b'a', b's', b't']);
    assert_eq!(bytes.len(), 2 + 6 + 16 + 4);
    let decoded = MirrorStateKey::decode(&bytes).expect("decode");
    assert_eq!(decoded, MirrorStateKey::PartitionState(key));

    let value = MirrorStateValue::PartitionState(MirrorPartitionStateValue::default());
    let value_bytes = value.encode(0).expect("encode");
    assert_eq!(
        hex(&value_bytes),
        // version 0; State 0, LeaderEpoch -1, StateEpoch 0, ErrorMessage null (compact 0),
        // RetryAttempt 0, PreviousState -1, no tagged fields.
        "0000".to_owned() + "00" + "ffffffff" + "00000000" + "00" + "0000" + "ff" + "00"
    );
    assert_eq!(
        MirrorStateValue::decode(&decoded, &value_bytes).expect("decode"),
        value
    );

    let lme_key = LastMirrorEpochsKey {
        mirror_name: "east".into(),
        topic_id: SAMPLE_TOPIC_ID,
        partition: 0,
    };
    let lme_bytes = framing::encode_key(&lme_key).expect("encode");
    assert_eq!(&lme_bytes[..2], &[0, 1]);
    assert_eq!(
        MirrorStateKey::decode(&lme_bytes).expect("decode"),
        MirrorStateKey::LastMirrorEpochs(lme_key.clone())
    );
    let lme = LastMirrorEpochsValue {
        last_mirror_epoch: 3,
    };
    let lme_value = framing::encode_value(&lme, 0).expect("encode");
    assert_eq!(
        framing::decode_value::<LastMirrorEpochsValue>(&lme_value),
        Ok(lme)
    );
    assert_eq!(
        framing::decode_key::<LastMirrorEpochsKey>(&lme_bytes),
        Ok(lme_key)
    );

    // Unknown type, unknown value version, truncated prefix; a non-key cannot be a key.
    let mut unknown = bytes.clone();
    unknown[1] = 9;
    assert!(matches!(
        MirrorStateKey::decode(&unknown),
        Err(DecodeError::UnknownRecordType { code: 9, .. })
    ));
    assert!(matches!(
        MirrorStateValue::decode(&decoded, &[0, 1, 0]),
        Err(DecodeError::UnsupportedVersion { version: 1, .. })
    ));
    assert!(matches!(
        MirrorStateKey::decode(&[0]),
        Err(DecodeError::Truncated { .. })
    ));
    assert!(matches!(
        framing::encode_key(&MirrorPidResetRecord { version: 0 }),
        Err(EncodeError::WrongKind { .. })
    ));
}

#[test]
fn every_truncation_of_a_golden_sample_is_refused() {
    for case in golden_cases() {
        for sample in &case.samples {
            let bytes = encode(case.schema, case.version, &sample.value).expect("encode");
            for len in 0..bytes.len() {
                assert!(
                    decode(case.schema, case.version, &bytes[..len]).is_err(),
                    "{} v{} {}: a {len}-byte prefix decoded",
                    case.schema.name,
                    case.version,
                    sample.name
                );
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(matches!(
                decode(case.schema, case.version, &longer),
                Err(DecodeError::TrailingBytes { count: 1, .. })
            ));
        }
    }
}

#[test]
fn tagged_fields_follow_kafkas_rules() {
    // StartMirrorTopicsRequest: ExcludePatterns is tag 0, written only when not empty.
    let mut request = StartMirrorTopicsRequest {
        mirror_name: "m".into(),
        include_patterns: vec![],
        exclude_patterns: vec![],
        timeout_ms: 1,
    };
    let plain = request.encode(0).expect("encode");
    assert_eq!(hex(&plain), "026d".to_owned() + "01" + "00000001" + "00");
    request.exclude_patterns = vec!["x".into()];
    let tagged = request.encode(0).expect("encode");
    // one tagged field: tag 0, size 3, compact array of one compact string "x".
    assert_eq!(
        hex(&tagged),
        "026d".to_owned() + "01" + "00000001" + "01" + "00" + "03" + "02" + "0278"
    );
    assert_eq!(StartMirrorTopicsRequest::decode(&tagged, 0), Ok(request));

    // Unknown tags are kept by the dynamic value, dropped by the typed struct.
    let schema = StartMirrorTopicsRequest::SCHEMA;
    let mut with_unknown = plain.clone();
    with_unknown.pop();
    with_unknown.extend_from_slice(&[2, 5, 1, 0xaa, 9, 0]);
    let value = decode(schema, 0, &with_unknown).expect("unknown tags are fine");
    assert_eq!(
        value.unknown_tagged_fields,
        vec![
            RawTaggedField {
                tag: 5,
                data: vec![0xaa]
            },
            RawTaggedField {
                tag: 9,
                data: vec![]
            }
        ]
    );
    assert_eq!(encode(schema, 0, &value).expect("encode"), with_unknown);
    assert!(StartMirrorTopicsRequest::decode(&with_unknown, 0).is_ok());

    // Out of order, repeated, or a known field not filling its declared size.
    let mut out_of_order = plain.clone();
    out_of_order.pop();
    out_of_order.extend_from_slice(&[2, 9, 0, 5, 0]);
    assert!(matches!(
        decode(schema, 0, &out_of_order),
        Err(DecodeError::TagOutOfOrder {
            tag: 5,
            previous: 9,
            ..
        })
    ));
    let mut repeated = plain.clone();
    repeated.pop();
    repeated.extend_from_slice(&[2, 5, 0, 5, 0]);
    assert!(matches!(
        decode(schema, 0, &repeated),
        Err(DecodeError::TagOutOfOrder { .. })
    ));
    let mut oversized = plain.clone();
    oversized.pop();
    oversized.extend_from_slice(&[1, 0, 2, 1, 0xff]);
    assert!(matches!(
        decode(schema, 0, &oversized),
        Err(DecodeError::TaggedFieldSize {
            declared: 2,
            used: 1,
            ..
        })
    ));
    // A tag colliding with a known one cannot be written.
    let mut clash = value.clone();
    clash.fields[2] = Value::Array(vec![Value::String("x".into())]);
    clash.unknown_tagged_fields = vec![RawTaggedField {
        tag: 0,
        data: vec![],
    }];
    assert!(matches!(
        encode(schema, 0, &clash),
        Err(EncodeError::DuplicateTag { tag: 0, .. })
    ));
}

#[test]
fn versions_decide_what_is_written() {
    let mut value = StructValue::defaults(CONFORMANCE.fields);
    assert!(matches!(
        encode(&CONFORMANCE, 4, &value),
        Err(EncodeError::UnsupportedVersion { version: 4, .. })
    ));
    assert!(matches!(
        decode(&CONFORMANCE, -1, &[]),
        Err(DecodeError::UnsupportedVersion { .. })
    ));
    // `Big` (1+) is not in version 0: a non-default value cannot be written there.
    value.fields[field("Big")] = Value::Uint32(1);
    assert!(matches!(
        encode(&CONFORMANCE, 0, &value),
        Err(EncodeError::NonDefaultFieldNotInVersion { version: 0, ref field }) if field == "Big"
    ));
    // `Legacy` (0-1) is ignorable: dropped at version 2, decoded as its default.
    let mut legacy = StructValue::defaults(CONFORMANCE.fields);
    legacy.fields[field("Legacy")] = Value::Int32(5);
    let bytes = encode(&CONFORMANCE, 2, &legacy).expect("ignorable");
    assert_eq!(
        decode(&CONFORMANCE, 2, &bytes).expect("decode"),
        StructValue::defaults(CONFORMANCE.fields)
    );
    // `MaybeCounts` exists from version 0 but is nullable only from 1: a null array cannot be
    // written in version 0.
    let mut null_counts = StructValue::defaults(CONFORMANCE.fields);
    null_counts.fields[field("MaybeCounts")] = Value::Null;
    assert!(matches!(
        encode(&CONFORMANCE, 0, &null_counts),
        Err(EncodeError::NullNotAllowed { version: 0, .. })
    ));
    assert!(encode(&CONFORMANCE, 1, &null_counts).is_ok());
    // Tagged fields cannot be written in a version that is not flexible.
    let mut raw = StructValue::defaults(CONFORMANCE.fields);
    raw.unknown_tagged_fields = vec![RawTaggedField {
        tag: 1,
        data: vec![],
    }];
    assert!(encode(&CONFORMANCE, 1, &raw).is_err());
    // A value of the wrong shape is a ShapeError, not bytes.
    let mut wrong = StructValue::defaults(CONFORMANCE.fields);
    wrong.fields[field("Count")] = Value::Int64(1);
    assert!(matches!(
        encode(&CONFORMANCE, 0, &wrong),
        Err(EncodeError::Shape(_))
    ));
    wrong.fields.pop();
    assert!(matches!(
        encode(&CONFORMANCE, 0, &wrong),
        Err(EncodeError::Shape(_))
    ));
}

#[test]
fn lengths_and_nulls_are_checked_like_kafka() {
    let schema = StopMirrorTopicsRequest::SCHEMA;
    // MirrorName "" then a null Topics array (compact 0): Topics is not nullable.
    assert!(matches!(
        decode(schema, 0, &[1, 0]),
        Err(DecodeError::NullNotAllowed { ref field }) if field == "Topics"
    ));
    // A null MirrorName.
    assert!(matches!(
        decode(schema, 0, &[0]),
        Err(DecodeError::NullNotAllowed { ref field }) if field == "MirrorName"
    ));
    // An array claiming more elements than bytes left.
    assert!(matches!(
        decode(schema, 0, &[1, 0x7f, 0]),
        Err(DecodeError::InvalidLength { len: 126, .. })
    ));
    // A string longer than 0x7fff, in a compact length, and invalid UTF-8.
    let mut long = vec![0x81, 0x80, 0x02];
    long.extend_from_slice(&[b'a'; 0x8000]);
    assert!(matches!(
        decode(schema, 0, &long),
        Err(DecodeError::InvalidLength { len: 0x8000, .. })
    ));
    assert!(matches!(
        decode(schema, 0, &[2, 0xff]),
        Err(DecodeError::InvalidUtf8 { .. })
    ));
    // A varint that never ends.
    assert!(matches!(
        decode(schema, 0, &[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
        Err(DecodeError::InvalidVarint { .. })
    ));
    // Writing a string of more than 32767 bytes fails in every encoding.
    let too_long = StopMirrorTopicsRequest {
        mirror_name: "a".repeat(0x8000),
        ..Default::default()
    };
    assert!(matches!(
        too_long.encode(0),
        Err(EncodeError::TooLong {
            len: 0x8000,
            max: 0x7fff,
            ..
        })
    ));
    let key = MirrorPartitionStateKey {
        mirror_name: "é".repeat(0x4000),
        topic_id: SAMPLE_TOPIC_ID,
        partition: 0,
    };
    assert!(matches!(key.encode(0), Err(EncodeError::TooLong { .. })));
}

/// What `docs/prototype-wire.md` says about the seed's `__mirror_state` codec
/// (`kmirror_kernel::records`) next to the prototype's.
#[test]
fn seed_records_next_to_the_prototypes() {
    use kmirror_kernel::records;
    use kmirror_kernel::state::MirrorState;
    use kmirror_kernel::types::{MirrorName, MirrorPartition, TopicId};

    let partition = MirrorPartition {
        mirror: MirrorName::new("east").expect("name"),
        topic_id: TopicId(SAMPLE_TOPIC_ID.0),
        partition: 7,
    };
    let prototype_key = MirrorPartitionStateKey {
        mirror_name: "east".into(),
        topic_id: SAMPLE_TOPIC_ID,
        partition: 7,
    };
    // Keys: the same fields and layout; the LME key is byte for byte the prototype's, the state
    // key differs only in its record type (seed 0, prototype 2).
    let seed_lme = records::MirrorStateKey::LastMirroredEpochs(partition.clone()).encode();
    let proto_lme = framing::encode_key(&LastMirrorEpochsKey {
        mirror_name: "east".into(),
        topic_id: SAMPLE_TOPIC_ID,
        partition: 7,
    })
    .expect("encode");
    assert_eq!(seed_lme, proto_lme);
    let seed_state = records::MirrorStateKey::PartitionState(partition).encode();
    let proto_state = framing::encode_key(&prototype_key).expect("encode");
    assert_eq!(&seed_state[..2], &[0, 0]);
    assert_eq!(&proto_state[..2], &[0, 2]);
    assert_eq!(seed_state[2..], proto_state[2..]);

    // Values: the seed's is not flexible (int16 string length, int32 retry count, no tagged
    // fields) and its state codes are its own; the prototype's is flexible.
    let seed_value = records::MirrorPartitionStateValue {
        state: MirrorState::Mirroring,
        leader_epoch: 12,
        state_epoch: 3,
        error_message: None,
        retry_attempt: 0,
        previous_state: None,
    }
    .encode()
    .expect("encode");
    let proto_value = framing::encode_value(
        &MirrorPartitionStateValue {
            state: 3,
            leader_epoch: 12,
            state_epoch: 3,
            error_message: None,
            retry_attempt: 0,
            previous_state: -1,
        },
        0,
    )
    .expect("encode");
    assert_eq!(hex(&seed_value), "0000020000000c00000003ffff00000000ff");
    assert_eq!(hex(&proto_value), "0000030000000c00000003000000ff00");
    // The seed's LME value carries the offset; the prototype's only the epoch.
    let seed_lme_value = records::LastMirroredEpochsValue {
        last_mirrored_epoch: Some(41),
        last_mirrored_offset: 1000,
    }
    .encode()
    .expect("encode");
    assert_eq!(seed_lme_value.len(), 2 + 4 + 8);
    let proto_lme_value = framing::encode_value(
        &LastMirrorEpochsValue {
            last_mirror_epoch: 41,
        },
        0,
    )
    .expect("encode");
    assert_eq!(hex(&proto_lme_value), "00000000002900");
    // MIRROR_PID_RESET: the seed writes control type 100 and a 2-byte value (int16 version);
    // the prototype's type is 7 and its value v0 is flexible: 3 bytes.
    assert_eq!(
        kmirror_kernel::batch::ControlType::MIRROR_PID_RESET_CODE,
        100
    );
    assert_eq!(
        kmirror_kernel::proto_wire::pid_reset::PROTOTYPE_MIRROR_PID_RESET_CONTROL_TYPE,
        7
    );
    assert_eq!(
        MirrorPidResetRecord { version: 0 }
            .encode(0)
            .expect("encode"),
        vec![0, 0, 0]
    );
}
