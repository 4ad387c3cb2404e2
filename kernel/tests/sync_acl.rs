//! ACL sync: exact creates and deletes, ownership, per-item rejection, idempotence.

use std::collections::BTreeSet;

use kmirror_kernel::sync::acl::{
    apply_acl_plan, plan_acls, AclBinding, AclFilter, AclSyncPolicy, RawAclBinding, ResourceType,
};
use kmirror_kernel::sync::pattern::Glob;
use kmirror_kernel::sync::SyncItemError;
use proptest::prelude::*;

fn raw(resource: &str, principal: &str, op: &str) -> RawAclBinding {
    let (t, n) = resource.split_once(':').unwrap();
    RawAclBinding {
        resource_type: t.into(),
        resource_name: n.into(),
        pattern_type: "LITERAL".into(),
        principal: principal.into(),
        host: "*".into(),
        operation: op.into(),
        permission_type: "ALLOW".into(),
    }
}

fn b(resource: &str, principal: &str, op: &str) -> AclBinding {
    AclBinding::from_raw(&raw(resource, principal, op)).unwrap()
}

fn policy() -> AclSyncPolicy {
    AclSyncPolicy {
        filters: vec![
            AclFilter {
                resource_type: Some(ResourceType::Topic),
                resource_name: Glob::new("orders"),
            },
            AclFilter {
                resource_type: Some(ResourceType::Group),
                resource_name: Glob::any(),
            },
        ],
        principals: Glob::new("User:app-*"),
    }
}

#[test]
fn creates_selected_bindings_and_deletes_only_its_own() {
    let source = vec![
        raw("TOPIC:orders", "User:app-1", "READ"),
        raw("GROUP:billing", "User:app-1", "READ"),
        raw("TOPIC:payments", "User:app-1", "READ"),
        raw("TOPIC:orders", "User:app-2", "WRITE"),
    ];
    let dest = BTreeSet::from([
        b("TOPIC:orders", "User:app-2", "WRITE"), // the operator's own
        b("TOPIC:orders", "User:app-old", "READ"), // the mirror's, gone on the source
        b("TOPIC:orders", "User:app-ops", "ALTER"), // the operator's, not on the source
    ]);
    let created = BTreeSet::from([b("TOPIC:orders", "User:app-old", "READ")]);
    let plan = plan_acls(&source, &dest, &created, &policy());
    assert_eq!(
        plan.creates,
        vec![
            b("TOPIC:orders", "User:app-1", "READ"),
            b("GROUP:billing", "User:app-1", "READ"),
        ]
    );
    assert_eq!(
        plan.deletes,
        vec![b("TOPIC:orders", "User:app-old", "READ")]
    );
    assert_eq!(
        plan.not_owned,
        vec![b("TOPIC:orders", "User:app-2", "WRITE")]
    );
    assert_eq!(plan.unselected, 1);
    assert!(plan.rejected.is_empty());
    let (dest, created) = apply_acl_plan(&dest, &created, &plan);
    assert!(dest.contains(&b("TOPIC:orders", "User:app-ops", "ALTER")));
    assert!(!created.contains(&b("TOPIC:orders", "User:app-2", "WRITE")));
    // The source drops the operator's binding: the mirror still leaves it alone.
    let plan = plan_acls(&source[..2], &dest, &created, &policy());
    assert!(plan.creates.is_empty() && plan.deletes.is_empty());
}

#[test]
fn hostile_bindings_are_rejected_per_item() {
    let mut bad_op = raw("TOPIC:orders", "User:app-1", "READ");
    bad_op.operation = "OWN".into();
    let mut bad_principal = raw("TOPIC:orders", "alice", "READ");
    bad_principal.host = "*".into();
    let source = vec![
        raw("TOPIC:orders", "User:admin", "ALL"),
        raw("TOPIC:orders", "User:*", "READ"),
        bad_op,
        bad_principal,
        raw("TOPIC:orders", "User:app-1", "READ"),
    ];
    let plan = plan_acls(&source, &BTreeSet::new(), &BTreeSet::new(), &policy());
    assert_eq!(plan.creates, vec![b("TOPIC:orders", "User:app-1", "READ")]);
    assert_eq!(plan.rejected.len(), 4);
    assert!(matches!(
        &plan.rejected[0],
        SyncItemError::AclPrincipalOutsidePattern { principal, .. } if principal == "User:admin"
    ));
    assert!(matches!(
        &plan.rejected[1],
        SyncItemError::AclPrincipalOutsidePattern { principal, .. } if principal == "User:*"
    ));
    assert!(plan.rejected[2]
        .to_string()
        .contains("unknown operation \"OWN\""));
    assert!(plan.rejected[3]
        .to_string()
        .contains("is not of the form <type>:<name>"));
}

fn arb_binding() -> impl Strategy<Value = AclBinding> {
    (
        prop::sample::select(vec!["TOPIC:orders", "TOPIC:other", "GROUP:g"]),
        prop::sample::select(vec!["User:app-1", "User:app-2", "User:eve"]),
        prop::sample::select(vec!["READ", "WRITE"]),
    )
        .prop_map(|(r, p, o)| b(r, p, o))
}

proptest! {
    /// After applying a plan nothing more changes; bindings the mirror did not create survive.
    #[test]
    fn acl_sync_is_idempotent_and_never_touches_foreign_bindings(
        source in prop::collection::vec(arb_binding(), 0..6),
        dest in prop::collection::btree_set(arb_binding(), 0..6),
        owned_mask in any::<u8>(),
    ) {
        let created: BTreeSet<AclBinding> = dest
            .iter()
            .enumerate()
            .filter(|(i, _)| owned_mask & (1 << (i % 8)) != 0)
            .map(|(_, b)| b.clone())
            .collect();
        let raw_source: Vec<RawAclBinding> = source.iter().map(AclBinding::to_raw).collect();
        let plan = plan_acls(&raw_source, &dest, &created, &policy());
        let (after, after_created) = apply_acl_plan(&dest, &created, &plan);
        for foreign in dest.difference(&created) {
            prop_assert!(after.contains(foreign));
        }
        let again = plan_acls(&raw_source, &after, &after_created, &policy());
        prop_assert!(again.creates.is_empty() && again.deletes.is_empty(), "{:?}", again);
    }
}
