//! Property tests of the prototype's wire formats: for every message (and every version of the
//! conformance schema), any value the schema allows at a version encodes, decodes back to
//! itself, and reads back through the typed struct; and no input bytes make the decoder panic.

use kmirror_kernel::proto_wire::codec::{decode, encode};
use kmirror_kernel::proto_wire::samples::{golden_cases, GoldenCase};
use kmirror_kernel::proto_wire::{
    FieldSchema, FieldType, RawTaggedField, StructValue, Uuid, Value,
};
use proptest::collection::vec;
use proptest::prelude::*;

fn case(name: &str, version: i16) -> GoldenCase {
    golden_cases()
        .into_iter()
        .find(|c| c.schema.name == name && c.version == version)
        .unwrap_or_else(|| panic!("no case {name} v{version}"))
}

fn element_value(ty: &'static FieldType, version: i16, flexible: bool) -> BoxedStrategy<Value> {
    match ty {
        FieldType::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        FieldType::Int8 => any::<i8>().prop_map(Value::Int8).boxed(),
        FieldType::Int16 => any::<i16>().prop_map(Value::Int16).boxed(),
        FieldType::Uint16 => any::<u16>().prop_map(Value::Uint16).boxed(),
        FieldType::Int32 => any::<i32>().prop_map(Value::Int32).boxed(),
        FieldType::Uint32 => any::<u32>().prop_map(Value::Uint32).boxed(),
        FieldType::Int64 => any::<i64>().prop_map(Value::Int64).boxed(),
        FieldType::Float64 => any::<f64>()
            .prop_filter("NaN is not equal to itself", |f| !f.is_nan())
            .prop_map(Value::Float64)
            .boxed(),
        FieldType::Uuid => any::<[u8; 16]>().prop_map(|b| Value::Uuid(Uuid(b))).boxed(),
        FieldType::String => "\\PC{0,12}".prop_map(Value::String).boxed(),
        FieldType::Bytes => vec(any::<u8>(), 0..8).prop_map(Value::Bytes).boxed(),
        FieldType::Array(element) => vec(element_value(element, version, flexible), 0..4)
            .prop_map(Value::Array)
            .boxed(),
        FieldType::Struct(s) => struct_value(s.fields, version, flexible)
            .prop_map(Value::Struct)
            .boxed(),
    }
}

fn field_value(field: &'static FieldSchema, version: i16, flexible: bool) -> BoxedStrategy<Value> {
    if !field.versions.contains(version) {
        return Just(Value::default_of(field)).boxed();
    }
    let value = element_value(&field.ty, version, flexible);
    if field.nullable_versions.contains(version) {
        prop_oneof![1 => Just(Value::Null), 3 => value].boxed()
    } else {
        value
    }
}

/// Any struct value valid at `version`, with unknown tagged fields (tags from 100) in
/// flexible versions.
fn struct_value(
    fields: &'static [FieldSchema],
    version: i16,
    flexible: bool,
) -> BoxedStrategy<StructValue> {
    let values: Vec<BoxedStrategy<Value>> = fields
        .iter()
        .map(|f| field_value(f, version, flexible))
        .collect();
    let unknown = if flexible {
        proptest::collection::btree_map(100u32..110, vec(any::<u8>(), 0..4), 0..3)
            .prop_map(|m| {
                m.into_iter()
                    .map(|(tag, data)| RawTaggedField { tag, data })
                    .collect::<Vec<_>>()
            })
            .boxed()
    } else {
        Just(Vec::new()).boxed()
    };
    (values, unknown)
        .prop_map(|(fields, unknown_tagged_fields)| StructValue {
            fields,
            unknown_tagged_fields,
        })
        .boxed()
}

/// The value with every unknown tagged field removed (what a typed struct keeps).
fn strip_unknown(value: &StructValue) -> StructValue {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Struct(s) => Value::Struct(strip_unknown(s)),
            Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    StructValue::new(value.fields.iter().map(strip).collect())
}

fn check_round_trip(case: &GoldenCase, value: &StructValue) -> Result<(), TestCaseError> {
    let bytes = encode(case.schema, case.version, value)
        .map_err(|e| TestCaseError::fail(format!("encode: {e}")))?;
    let back = decode(case.schema, case.version, &bytes)
        .map_err(|e| TestCaseError::fail(format!("decode: {e}")))?;
    prop_assert_eq!(&back, value);
    if let Some(typed_decode) = case.typed_decode {
        let typed = typed_decode(&bytes, case.version)
            .map_err(|e| TestCaseError::fail(format!("typed decode: {e}")))?;
        let stripped = strip_unknown(value);
        prop_assert_eq!(&typed, &stripped);
        // The typed struct writes what the dynamic value without unknown tags writes.
        let typed_bytes = encode(case.schema, case.version, &typed)
            .map_err(|e| TestCaseError::fail(format!("typed encode: {e}")))?;
        prop_assert_eq!(
            typed_bytes,
            encode(case.schema, case.version, &stripped).expect("stripped encodes")
        );
    }
    Ok(())
}

macro_rules! round_trip {
    ($($test:ident: $name:literal v $version:literal;)*) => {$(
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(200))]
            #[test]
            fn $test(value in {
                let c = case($name, $version);
                struct_value(c.schema.fields, $version, c.schema.flexible_versions.contains($version))
            }) {
                check_round_trip(&case($name, $version), &value)?;
            }
        }
    )*};
}

round_trip! {
    mirror_partition_state_key: "MirrorPartitionStateKey" v 0;
    mirror_partition_state_value: "MirrorPartitionStateValue" v 0;
    last_mirror_epochs_key: "LastMirrorEpochsKey" v 0;
    last_mirror_epochs_value: "LastMirrorEpochsValue" v 0;
    last_mirrored_offsets_key: "LastMirroredOffsetsKey" v 0;
    last_mirrored_offsets_value: "LastMirroredOffsetsValue" v 0;
    mirror_topics_key: "MirrorTopicsKey" v 0;
    start_mirror_topics_request: "StartMirrorTopicsRequest" v 0;
    start_mirror_topics_response: "StartMirrorTopicsResponse" v 0;
    stop_mirror_topics_request: "StopMirrorTopicsRequest" v 0;
    stop_mirror_topics_response: "StopMirrorTopicsResponse" v 0;
    pause_mirror_topics_request: "PauseMirrorTopicsRequest" v 0;
    pause_mirror_topics_response: "PauseMirrorTopicsResponse" v 0;
    resume_mirror_topics_request: "ResumeMirrorTopicsRequest" v 0;
    resume_mirror_topics_response: "ResumeMirrorTopicsResponse" v 0;
    recover_mirror_topics_request: "RecoverMirrorTopicsRequest" v 0;
    recover_mirror_topics_response: "RecoverMirrorTopicsResponse" v 0;
    read_mirror_states_request: "ReadMirrorStatesRequest" v 0;
    read_mirror_states_response: "ReadMirrorStatesResponse" v 0;
    write_mirror_states_request: "WriteMirrorStatesRequest" v 0;
    write_mirror_states_response: "WriteMirrorStatesResponse" v 0;
    bump_leader_epochs_request: "BumpLeaderEpochsRequest" v 0;
    bump_leader_epochs_response: "BumpLeaderEpochsResponse" v 0;
    mirror_pid_reset_record: "MirrorPidResetRecord" v 0;
    conformance_v0: "KmirrorWireConformance" v 0;
    conformance_v1: "KmirrorWireConformance" v 1;
    conformance_v2: "KmirrorWireConformance" v 2;
    conformance_v3: "KmirrorWireConformance" v 3;
}

#[test]
fn every_case_has_a_round_trip_test() {
    // The macro above lists 28 cases; a new message or version must be added there.
    assert_eq!(golden_cases().len(), 28);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random bytes, and golden samples with a byte changed, never panic the decoder; whatever
    /// decodes re-encodes to bytes that decode to the same value.
    #[test]
    fn decoding_any_bytes_never_panics(
        which in any::<prop::sample::Index>(),
        sample in any::<prop::sample::Index>(),
        noise in vec(any::<u8>(), 0..64),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        use_noise in any::<bool>(),
    ) {
        let cases = golden_cases();
        let case = which.get(&cases);
        let input = if use_noise {
            noise
        } else {
            let value = &sample.get(&case.samples).value;
            let mut bytes = encode(case.schema, case.version, value).expect("sample encodes");
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
            bytes
        };
        if let Ok(value) = decode(case.schema, case.version, &input) {
            let again = encode(case.schema, case.version, &value)
                .map_err(|e| TestCaseError::fail(format!("re-encode: {e}")))?;
            prop_assert_eq!(decode(case.schema, case.version, &again).ok(), Some(value));
        }
    }
}
