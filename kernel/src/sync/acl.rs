//! ACL sync: the source's ACL bindings the mirror's filters select, as creates and deletes on
//! the destination, never touching a binding the mirror did not create.
//!
//! The destination keeps the set of bindings the mirror created (the harness keeps it beside
//! the ACLs; a broker would keep it in the mirror's metadata). A source binding selected by a
//! filter is created on the destination when missing there; a binding the mirror created that
//! the source no longer has (or the filters no longer select) is deleted. A binding that was on
//! the destination before, or that an operator added, is never deleted, even when the source
//! has the same binding and then drops it.
//!
//! A selected binding whose principal falls outside the mirror's principal pattern is rejected
//! (a source must not grant arbitrary principals access to the destination), as is a binding
//! whose fields do not parse.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::pattern::Glob;
use super::SyncItemError;

/// Kafka's `ResourceType` (the ones a binding can name).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum ResourceType {
    /// `TOPIC`.
    Topic,
    /// `GROUP`.
    Group,
    /// `CLUSTER`.
    Cluster,
    /// `TRANSACTIONAL_ID`.
    TransactionalId,
    /// `DELEGATION_TOKEN`.
    DelegationToken,
    /// `USER`.
    User,
}

/// Kafka's `PatternType` (of a binding: `LITERAL` or `PREFIXED`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum PatternType {
    /// `LITERAL`.
    Literal,
    /// `PREFIXED`.
    Prefixed,
}

/// Kafka's `AclOperation`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum AclOperation {
    /// `ALL`.
    All,
    /// `READ`.
    Read,
    /// `WRITE`.
    Write,
    /// `CREATE`.
    Create,
    /// `DELETE`.
    Delete,
    /// `ALTER`.
    Alter,
    /// `DESCRIBE`.
    Describe,
    /// `CLUSTER_ACTION`.
    ClusterAction,
    /// `DESCRIBE_CONFIGS`.
    DescribeConfigs,
    /// `ALTER_CONFIGS`.
    AlterConfigs,
    /// `IDEMPOTENT_WRITE`.
    IdempotentWrite,
    /// `CREATE_TOKENS`.
    CreateTokens,
    /// `DESCRIBE_TOKENS`.
    DescribeTokens,
}

/// Kafka's `AclPermissionType`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum AclPermissionType {
    /// `ALLOW`.
    Allow,
    /// `DENY`.
    Deny,
}

macro_rules! kafka_names {
    ($ty:ident { $($variant:ident = $name:literal),* $(,)? }) => {
        impl $ty {
            /// Kafka's name of the value.
            pub fn kafka_name(self) -> &'static str {
                match self { $($ty::$variant => $name),* }
            }

            /// The value with Kafka's name `name` (case-insensitive).
            pub fn from_kafka_name(name: &str) -> Option<Self> {
                [$($ty::$variant),*].into_iter().find(|v| v.kafka_name().eq_ignore_ascii_case(name))
            }
        }
    };
}

kafka_names!(ResourceType {
    Topic = "TOPIC",
    Group = "GROUP",
    Cluster = "CLUSTER",
    TransactionalId = "TRANSACTIONAL_ID",
    DelegationToken = "DELEGATION_TOKEN",
    User = "USER",
});
kafka_names!(PatternType {
    Literal = "LITERAL",
    Prefixed = "PREFIXED",
});
kafka_names!(AclOperation {
    All = "ALL",
    Read = "READ",
    Write = "WRITE",
    Create = "CREATE",
    Delete = "DELETE",
    Alter = "ALTER",
    Describe = "DESCRIBE",
    ClusterAction = "CLUSTER_ACTION",
    DescribeConfigs = "DESCRIBE_CONFIGS",
    AlterConfigs = "ALTER_CONFIGS",
    IdempotentWrite = "IDEMPOTENT_WRITE",
    CreateTokens = "CREATE_TOKENS",
    DescribeTokens = "DESCRIBE_TOKENS",
});
kafka_names!(AclPermissionType {
    Allow = "ALLOW",
    Deny = "DENY",
});

/// An ACL binding as read from a source (`DescribeAcls`), every field a string.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct RawAclBinding {
    /// `TOPIC`, `GROUP`, ...
    pub resource_type: String,
    /// The resource name (or prefix).
    pub resource_name: String,
    /// `LITERAL` or `PREFIXED`.
    pub pattern_type: String,
    /// `<type>:<name>`, e.g. `User:alice`.
    pub principal: String,
    /// The host (`*` for any).
    pub host: String,
    /// `READ`, `WRITE`, ...
    pub operation: String,
    /// `ALLOW` or `DENY`.
    pub permission_type: String,
}

/// An ACL binding: Kafka's `AclBinding` (resource pattern plus access control entry).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct AclBinding {
    /// The resource type.
    pub resource_type: ResourceType,
    /// The resource name (or prefix).
    pub resource_name: String,
    /// How the name matches.
    pub pattern_type: PatternType,
    /// `<type>:<name>`.
    pub principal: String,
    /// The host.
    pub host: String,
    /// The operation.
    pub operation: AclOperation,
    /// Allow or deny.
    pub permission_type: AclPermissionType,
}

impl fmt::Display for RawAclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "({} {}:{} {} {} {} from {})",
            self.permission_type,
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.operation,
            self.host
        )
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_raw(), f)
    }
}

impl AclBinding {
    /// Parses a binding read from a source.
    pub fn from_raw(raw: &RawAclBinding) -> Result<Self, SyncItemError> {
        let bad = |reason: String| SyncItemError::InvalidAcl {
            binding: raw.to_string(),
            reason,
        };
        let resource_type = ResourceType::from_kafka_name(&raw.resource_type)
            .ok_or_else(|| bad(format!("unknown resource type {:?}", raw.resource_type)))?;
        let pattern_type = PatternType::from_kafka_name(&raw.pattern_type).ok_or_else(|| {
            bad(format!(
                "pattern type {:?} is not LITERAL or PREFIXED",
                raw.pattern_type
            ))
        })?;
        let operation = AclOperation::from_kafka_name(&raw.operation)
            .ok_or_else(|| bad(format!("unknown operation {:?}", raw.operation)))?;
        let permission_type =
            AclPermissionType::from_kafka_name(&raw.permission_type).ok_or_else(|| {
                bad(format!(
                    "permission type {:?} is not ALLOW or DENY",
                    raw.permission_type
                ))
            })?;
        if raw.resource_name.is_empty() {
            return Err(bad("the resource name is empty".into()));
        }
        match raw.principal.split_once(':') {
            Some((t, n)) if !t.is_empty() && !n.is_empty() => {}
            _ => {
                return Err(bad(format!(
                    "principal {:?} is not of the form <type>:<name>",
                    raw.principal
                )))
            }
        }
        if raw.host.is_empty() {
            return Err(bad("the host is empty (use * for any host)".into()));
        }
        Ok(AclBinding {
            resource_type,
            resource_name: raw.resource_name.clone(),
            pattern_type,
            principal: raw.principal.clone(),
            host: raw.host.clone(),
            operation,
            permission_type,
        })
    }

    /// The binding with Kafka's names.
    pub fn to_raw(&self) -> RawAclBinding {
        RawAclBinding {
            resource_type: self.resource_type.kafka_name().into(),
            resource_name: self.resource_name.clone(),
            pattern_type: self.pattern_type.kafka_name().into(),
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation: self.operation.kafka_name().into(),
            permission_type: self.permission_type.kafka_name().into(),
        }
    }
}

/// Selects bindings by resource: a type (any when `None`) and a name pattern.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct AclFilter {
    /// The resource type (any when `None`).
    pub resource_type: Option<ResourceType>,
    /// The resource name pattern.
    pub resource_name: Glob,
}

impl AclFilter {
    /// Whether the filter selects `b`.
    pub fn selects(&self, b: &AclBinding) -> bool {
        self.resource_type.is_none_or(|t| t == b.resource_type)
            && self.resource_name.matches(&b.resource_name)
    }
}

/// What the operator configures about the ACL sync.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct AclSyncPolicy {
    /// The mirror's ACL filters: a binding is synced when any selects it.
    pub filters: Vec<AclFilter>,
    /// The principals the mirror may grant to.
    pub principals: Glob,
}

/// The outcome of planning the ACL sync.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct AclPlan {
    /// `CreateAcls` on the destination, sorted.
    pub creates: Vec<AclBinding>,
    /// `DeleteAcls` (exact bindings) on the destination, sorted; only bindings the mirror
    /// created.
    pub deletes: Vec<AclBinding>,
    /// Selected source bindings already on the destination that the mirror did not create:
    /// left alone (and never deleted by the mirror).
    pub not_owned: Vec<AclBinding>,
    /// Source bindings no filter selects.
    pub unselected: usize,
    /// Source bindings refused.
    pub rejected: Vec<SyncItemError>,
}

/// The ACL changes for `source` bindings, given every binding on the destination (`dest`) and
/// the ones the mirror created there (`created`).
pub fn plan_acls(
    source: &[RawAclBinding],
    dest: &BTreeSet<AclBinding>,
    created: &BTreeSet<AclBinding>,
    policy: &AclSyncPolicy,
) -> AclPlan {
    let mut plan = AclPlan::default();
    let mut wanted = BTreeSet::new();
    for raw in source {
        let binding = match AclBinding::from_raw(raw) {
            Ok(b) => b,
            Err(e) => {
                plan.rejected.push(e);
                continue;
            }
        };
        if !policy.filters.iter().any(|f| f.selects(&binding)) {
            plan.unselected += 1;
            continue;
        }
        if !policy.principals.matches(&binding.principal) {
            plan.rejected
                .push(SyncItemError::AclPrincipalOutsidePattern {
                    binding: binding.to_string(),
                    principal: binding.principal.clone(),
                    pattern: policy.principals.to_string(),
                });
            continue;
        }
        wanted.insert(binding);
    }
    for b in &wanted {
        if !dest.contains(b) {
            plan.creates.push(b.clone());
        } else if !created.contains(b) {
            plan.not_owned.push(b.clone());
        }
    }
    plan.deletes = created
        .iter()
        .filter(|b| dest.contains(*b) && !wanted.contains(*b))
        .cloned()
        .collect();
    plan
}

/// The destination's bindings and the mirror's created set after applying `plan`. A binding
/// the mirror created but that is gone from the destination is forgotten.
pub fn apply_acl_plan(
    dest: &BTreeSet<AclBinding>,
    created: &BTreeSet<AclBinding>,
    plan: &AclPlan,
) -> (BTreeSet<AclBinding>, BTreeSet<AclBinding>) {
    let mut dest = dest.clone();
    let mut created: BTreeSet<AclBinding> = created.intersection(&dest).cloned().collect();
    for b in &plan.creates {
        dest.insert(b.clone());
        created.insert(b.clone());
    }
    for b in &plan.deletes {
        dest.remove(b);
        created.remove(b);
    }
    (dest, created)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_names_round_trip() {
        for op in ["READ", "write", "IDEMPOTENT_WRITE", "describe_configs"] {
            let o = AclOperation::from_kafka_name(op).unwrap();
            assert!(o.kafka_name().eq_ignore_ascii_case(op));
        }
        assert_eq!(AclOperation::from_kafka_name("ANY"), None);
        assert_eq!(ResourceType::from_kafka_name("UNKNOWN"), None);
    }
}
