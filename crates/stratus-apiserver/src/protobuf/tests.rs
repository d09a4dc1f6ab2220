//! Round trips for every kind in the table, cross-checked against k8s-pb's
//! prost types, and hostile input.

use base64::Engine as _;
use proptest::prelude::*;
use prost::Message as _;
use serde_json::{Map, Value, json};

use super::schema::{Schema, Shape, Type};
use super::*;

/// A sample value for every field of a message, `depth` levels deep.
fn sample(name: &str, depth: usize) -> Value {
    match name {
        "io.k8s.apimachinery.pkg.apis.meta.v1.Time" => return json!("2026-11-24T08:00:01Z"),
        "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime" => {
            return json!("2026-11-24T08:00:01.123456Z");
        }
        "io.k8s.apimachinery.pkg.api.resource.Quantity" => return json!("250m"),
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => {
            return if depth.is_multiple_of(2) {
                json!(8080)
            } else {
                json!("http")
            };
        }
        "io.k8s.apimachinery.pkg.runtime.RawExtension" => return json!({"a": [1, "b"]}),
        "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1" => return json!({"f:metadata": {}}),
        _ => {}
    }
    if let Some(rest) = name.strip_prefix(well_known_apiext()) {
        match rest {
            "JSON" => return json!({"x": [1]}),
            "JSONSchemaPropsOrBool" => return json!(true),
            "JSONSchemaPropsOrArray" => return json!([{"type": "string"}]),
            "JSONSchemaPropsOrStringArray" => return json!(["a", "b"]),
            _ => {}
        }
    }
    let schema = Schema::get();
    let Some(msg) = schema.message(name) else {
        return json!({});
    };
    if let Some((_, ty)) = msg.list_of {
        return json!([scalar(ty, depth, "items"), scalar(ty, depth, "more")]);
    }
    let mut out = Map::new();
    for f in &msg.fields {
        if depth == 0 && matches!(f.ty, Type::Message(_)) {
            continue;
        }
        let v = match f.shape {
            Shape::Inline => {
                if let Value::Object(inner) = sample_of(f.ty, depth) {
                    out.extend(inner);
                }
                continue;
            }
            Shape::Single { .. } => scalar(f.ty, depth, f.json),
            Shape::Repeated => json!([scalar(f.ty, depth, f.json)]),
            Shape::Map => json!({"k": scalar(f.ty, depth, f.json)}),
        };
        out.insert(f.json.to_owned(), v);
    }
    Value::Object(out)
}

fn well_known_apiext() -> &'static str {
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."
}

fn sample_of(ty: Type, depth: usize) -> Value {
    match ty {
        Type::Message(m) => sample(m, depth.saturating_sub(1)),
        other => scalar(other, depth, "x"),
    }
}

fn scalar(ty: Type, depth: usize, name: &str) -> Value {
    match ty {
        Type::String => json!(format!("s-{name}")),
        Type::Bool => json!(true),
        Type::Int32 => json!(-7),
        Type::Int64 => json!(1_i64 << 40),
        Type::Double => json!(1.5),
        Type::Bytes => json!(base64::engine::general_purpose::STANDARD.encode(b"\x00bytes\xff")),
        Type::Message(m) => sample(m, depth.saturating_sub(1)),
    }
}

fn with_type_meta(api_version: &str, kind: &str, body: Value) -> Value {
    let mut obj = match body {
        Value::Object(o) => o,
        _ => Map::new(),
    };
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Value::Object(obj)
}

#[test]
fn every_kind_round_trips_through_protobuf() {
    let mut kinds: Vec<_> = Schema::get().kinds().collect();
    kinds.sort();
    assert!(kinds.len() > 90, "only {} kinds", kinds.len());
    for (api_version, kind, message) in kinds {
        let object = with_type_meta(api_version, kind, sample(message, 4));
        let bytes =
            encode_object(&object).unwrap_or_else(|e| panic!("{api_version} {kind}: encode: {e}"));
        let back =
            decode_object(&bytes).unwrap_or_else(|e| panic!("{api_version} {kind}: decode: {e}"));
        assert_eq!(back, object, "{api_version} {kind} changed in a round trip");
        let list_kind = format!("{kind}List");
        if Schema::get().kind(api_version, &list_kind).is_some() {
            // A kind of its own (`APIGroupList`), already checked above.
            continue;
        }

        let list = json!({
            "apiVersion": api_version,
            "kind": list_kind,
            "metadata": {"resourceVersion": "12", "continue": "abc"},
            "items": [sample(message, 2)],
        });
        let bytes = encode_object(&list).unwrap();
        assert_eq!(decode_object(&bytes).unwrap(), list, "{kind}List");
    }
}

/// Our bytes, read and rewritten by k8s-pb's prost types, read back to the
/// same JSON: the field numbers, wire types, map entries, packing and the
/// well-known types agree with the generated code.
macro_rules! cross_check {
    ($($api_version:literal $kind:literal => $ty:ty),* $(,)?) => {
        #[test]
        fn our_bytes_are_what_prost_reads_and_writes() {
            $(
                let message = Schema::get().kind($api_version, $kind).expect($kind);
                let object = with_type_meta($api_version, $kind, sample(message, 5));
                let ours = encode_object(&object).unwrap();
                let env = envelope(&ours).unwrap();
                let typed = <$ty>::decode(env.raw)
                    .unwrap_or_else(|e| panic!("prost cannot read our {}: {e}", $kind));
                let theirs = typed.encode_to_vec();
                let rewrapped = enveloped($api_version, $kind, Some(&theirs));
                assert_eq!(decode_object(&rewrapped).unwrap(), object, "{} via prost", $kind);
            )*
        }
    };
}

cross_check! {
    "v1" "Pod" => k8s_pb::api::core::v1::Pod,
    "v1" "Namespace" => k8s_pb::api::core::v1::Namespace,
    "v1" "Node" => k8s_pb::api::core::v1::Node,
    "v1" "Service" => k8s_pb::api::core::v1::Service,
    "v1" "ConfigMap" => k8s_pb::api::core::v1::ConfigMap,
    "v1" "Secret" => k8s_pb::api::core::v1::Secret,
    "v1" "ServiceAccount" => k8s_pb::api::core::v1::ServiceAccount,
    "v1" "PersistentVolume" => k8s_pb::api::core::v1::PersistentVolume,
    "v1" "Event" => k8s_pb::api::core::v1::Event,
    "v1" "Status" => k8s_pb::apimachinery::pkg::apis::meta::v1::Status,
    "apps/v1" "Deployment" => k8s_pb::api::apps::v1::Deployment,
    "apps/v1" "StatefulSet" => k8s_pb::api::apps::v1::StatefulSet,
    "batch/v1" "CronJob" => k8s_pb::api::batch::v1::CronJob,
    "rbac.authorization.k8s.io/v1" "ClusterRole" => k8s_pb::api::rbac::v1::ClusterRole,
    "policy/v1" "Eviction" => k8s_pb::api::policy::v1::Eviction,
    "authentication.k8s.io/v1" "TokenRequest" => k8s_pb::api::authentication::v1::TokenRequest,
    "authentication.k8s.io/v1" "TokenReview" => k8s_pb::api::authentication::v1::TokenReview,
    "coordination.k8s.io/v1" "Lease" => k8s_pb::api::coordination::v1::Lease,
    "networking.k8s.io/v1" "Ingress" => k8s_pb::api::networking::v1::Ingress,
    "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" =>
        k8s_pb::api::admissionregistration::v1::MutatingWebhookConfiguration,
    "apiextensions.k8s.io/v1" "CustomResourceDefinition" =>
        k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
}

#[test]
fn wrapper_types_have_their_json_forms() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "creationTimestamp": "2026-01-02T03:04:05Z",
                     "deletionGracePeriodSeconds": 0},
        "spec": {"containers": [{"name": "c", "image": "i",
            "ports": [{"containerPort": 80}],
            "resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}},
            "readinessProbe": {"httpGet": {"port": "http", "path": "/"}},
            "livenessProbe": {"tcpSocket": {"port": 8080}}}],
            "automountServiceAccountToken": false,
            "securityContext": {"runAsUser": 0}},
    });
    let bytes = encode_object(&pod).unwrap();
    assert_eq!(decode_object(&bytes).unwrap(), pod);
    // A Go client sends a zero time as an empty message: left out.
    let mut raw = Vec::new();
    let mut meta = Vec::new();
    wire::put_len(&mut meta, 1, b"p");
    wire::put_len(&mut meta, 8, b"");
    wire::put_len(&mut raw, 1, &meta);
    let object = decode::object("io.k8s.api.core.v1.Pod", &raw, 0).unwrap();
    assert_eq!(Value::Object(object), json!({"metadata": {"name": "p"}}));
}

#[test]
fn quantities_given_as_numbers_are_written_as_strings() {
    let cm = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": 2}}]}});
    let back = decode_object(&encode_object(&cm).unwrap()).unwrap();
    assert_eq!(back["spec"]["limits"][0]["max"]["cpu"], json!("2"));
}

/// `k8s\0` + an Unknown with this type meta (and, when given, raw bytes).
fn enveloped(api_version: &str, kind: &str, raw: Option<&[u8]>) -> Vec<u8> {
    let mut body = MAGIC.to_vec();
    let mut tm = Vec::new();
    wire::put_len(&mut tm, 1, api_version.as_bytes());
    wire::put_len(&mut tm, 2, kind.as_bytes());
    wire::put_len(&mut body, 1, &tm);
    if let Some(raw) = raw {
        wire::put_len(&mut body, 2, raw);
    }
    body
}

#[test]
fn bad_envelopes_are_typed_errors() {
    assert_eq!(decode_object(b"k8s"), Err(ProtobufError::MissingMagic));
    assert_eq!(
        decode_object(b"{\"kind\":1}"),
        Err(ProtobufError::MissingMagic)
    );
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
    assert!(matches!(
        encode_object(&widget),
        Err(ProtobufError::UnknownKind { .. })
    ));
    // An envelope with gzip content encoding.
    let mut body = enveloped("v1", "Pod", Some(b""));
    wire::put_len(&mut body, 3, b"gzip");
    assert_eq!(
        decode_object(&body),
        Err(ProtobufError::ContentEncoding("gzip".into()))
    );
    // A kind the table does not have.
    assert!(matches!(
        decode_object(&enveloped("v1", "Gadget", Some(b""))),
        Err(ProtobufError::UnknownKind { .. })
    ));
    // An envelope whose object bytes are missing.
    assert_eq!(
        decode_object(&enveloped("v1", "ConfigMap", None)),
        Err(ProtobufError::NoObject)
    );
    // A string field with a varint.
    let mut raw = Vec::new();
    let mut meta = Vec::new();
    wire::put_varint_field(&mut meta, 1, 5);
    wire::put_len(&mut raw, 1, &meta);
    let body = enveloped("v1", "ConfigMap", Some(&raw));
    assert!(matches!(
        decode_object(&body),
        Err(ProtobufError::WrongWireType { ref path, .. }) if path == "metadata.name"
    ));
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    // JSONSchemaProps nested 500 levels through `items` (deeper JSON would
    // overflow the stack of this test when dropped, not of the codec).
    let mut schema = json!({"type": "string"});
    for _ in 0..500 {
        schema = json!({"type": "array", "items": schema});
    }
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}});
    assert_eq!(encode_object(&crd), Err(ProtobufError::TooDeep));
    // The same on the wire: each level a JSONSchemaPropsOrArray (field 24 of
    // JSONSchemaProps, `items`) holding a JSONSchemaProps.
    let mut inner: Vec<u8> = Vec::new();
    for _ in 0..10_000 {
        let mut or_array = Vec::new();
        wire::put_len(&mut or_array, 1, &inner);
        let mut props = Vec::new();
        wire::put_len(&mut props, 24, &or_array);
        inner = props;
    }
    let result = decode::message(
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
        &inner,
        0,
        Path::ROOT,
    );
    assert_eq!(result, Err(ProtobufError::TooDeep));
}

#[test]
fn every_truncation_of_a_pod_is_an_error() {
    let object = with_type_meta("v1", "Pod", sample("io.k8s.api.core.v1.Pod", 4));
    let bytes = encode_object(&object).unwrap();
    // The envelope ends with two empty fields (contentEncoding, contentType:
    // 2 bytes each); every cut before them is inside the object's bytes or
    // the envelope's header.
    let object_end = bytes.len() - 4;
    for end in 0..object_end {
        let result = decode_object(&bytes[..end]);
        assert!(result.is_err(), "a cut at {end} of {} decoded", bytes.len());
        if end < MAGIC.len() {
            assert_eq!(result, Err(ProtobufError::MissingMagic));
        }
    }
    // Cuts between or after the trailing empty fields leave a whole object.
    for end in [object_end, object_end + 2, bytes.len()] {
        assert_eq!(decode_object(&bytes[..end]).unwrap(), object);
    }
}

#[test]
fn watch_frames_carry_enveloped_objects() {
    let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
        "code": 410, "reason": "Expired", "message": "too old"});
    let frame = encode_watch_event("ERROR", &status).unwrap();
    assert_eq!(
        u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize,
        frame.len() - 4
    );
    let (t, o) = decode_watch_event(&frame[4..]).unwrap();
    assert_eq!(t, "ERROR");
    assert_eq!(o, status);
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend_from_slice(&body);
        let _ = decode_object(&with_magic);
        let _ = decode_object(&body);
        let _ = decode_watch_event(&body);
    }

    #[test]
    fn mutated_objects_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)
    ) {
        let object = with_type_meta("apps/v1", "Deployment",
            sample("io.k8s.api.apps.v1.Deployment", 4));
        let mut bytes = encode_object(&object).unwrap();
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let _ = decode_object(&bytes);
    }

    #[test]
    fn strings_and_numbers_round_trip(
        name in "[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?",
        value in ".{0,64}",
        replicas in any::<i32>(),
        generation in any::<i64>(),
    ) {
        let object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "generation": generation, "annotations": {"a": value}},
            "spec": {"replicas": replicas, "selector": {}, "template": {}}});
        prop_assert_eq!(decode_object(&encode_object(&object).unwrap()).unwrap(), object);
    }
}
