//! Resolving declarations against the database: the options as given (a
//! `Request`) become a `Declared` table, or the list of every problem with
//! them.
//!
//! Each table resolves on its own first (its columns, key, options, rule
//! and groups); then all together: the foreign keys between declared tables
//! become references, a follows rule finds the one it follows, and the
//! references put the tables in order, parents first.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use magic_sync_proto::key::KeyType;

use crate::catalog::table_sql::quote_literal;
use crate::catalog::{Apply, Assignments, Declared, Members, Mirror, Reference, Replicas, Rule};
use crate::declare::rule_text::{self, RuleText};
use crate::declare::system_catalog::{self, Column, ForeignKey, Relation};
use crate::error::Error;

/// Something wrong with a declaration: what, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub message: String,
    pub hint: String,
}

fn problem(message: impl Into<String>, hint: impl Into<String>) -> Problem {
    Problem {
        message: message.into(),
        hint: hint.into(),
    }
}

/// A declaration's options as they were given to `sync.declare_table()`
/// (relation names as the user wrote them, until resolved: then
/// schema-qualified and quoted, so they read the same whatever the search
/// path).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Request {
    pub relation: String,
    pub mirror: String,
    pub sync: Option<String>,
    pub name: Option<String>,
    pub key: Option<Vec<String>>,
    pub origin: Option<String>,
    pub version: Option<String>,
    pub created: Option<String>,
    pub desired: Option<Vec<String>>,
    pub apply: Option<String>,
    pub replica_owned: Option<Vec<String>>,
    pub active: Option<String>,
    pub unmirrored: Option<Vec<String>>,
    pub install: bool,
    pub indexes: bool,
}

impl Request {
    /// As sync.tables.request keeps it.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a request is plain data")
    }

    /// As sync.tables.request keeps it: a request the engine wrote that
    /// does not read back is an engine fault.
    pub fn from_json(value: Value) -> Result<Request, Error> {
        serde_json::from_value(value).map_err(|e| {
            Error::engine(
                format!("magic_sync: sync.tables.request does not read back: {e}"),
                "The engine writes this value itself: its tables were changed by hand, or this is a bug.",
            )
        })
    }

    /// The call that makes this declaration: what a hint tells a user to
    /// run again.
    pub fn call(&self) -> String {
        let array = |items: &[String]| {
            quote_literal(&format!(
                "{{{}}}",
                items
                    .iter()
                    .map(|i| format!("\"{}\"", i.replace('\\', "\\\\").replace('"', "\\\"")))
                    .collect::<Vec<_>>()
                    .join(",")
            ))
        };
        let mut args = vec![quote_literal(&self.relation)];
        if self.mirror != "catalog" {
            args.push(format!("mirror => {}", quote_literal(&self.mirror)));
        }
        let texts = [
            ("sync", &self.sync),
            ("name", &self.name),
            ("origin", &self.origin),
            ("version", &self.version),
            ("created", &self.created),
            ("apply", &self.apply),
            ("active", &self.active),
        ];
        for (option, value) in texts {
            if let Some(value) = value {
                args.push(format!("{option} => {}", quote_literal(value)));
            }
        }
        let lists = [
            ("key", &self.key),
            ("desired", &self.desired),
            ("replica_owned", &self.replica_owned),
            ("unmirrored", &self.unmirrored),
        ];
        for (option, value) in lists {
            if let Some(value) = value {
                args.push(format!("{option} => {}", array(value)));
            }
        }
        if !self.install {
            args.push("install => false".to_owned());
        }
        if !self.indexes {
            args.push("indexes => false".to_owned());
        }
        format!("SELECT sync.declare_table({});", args.join(", "))
    }
}

/// A table resolved on its own, before the references between tables.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub table: Declared,
    /// The relation, as found.
    pub found: Relation,
    /// Every column of the table, as declared.
    pub shape: Vec<Column>,
    /// The request, relation names resolved.
    pub request: Request,
    /// The columns a follows rule names, until its reference is found.
    follows: Option<Vec<String>>,
}

/// What a declaration is resolved against besides its own table.
pub struct Context {
    pub replicas: Option<Replicas>,
    /// The replicas' relation, when it exists.
    pub replicas_oid: Option<pgrx::pg_sys::Oid>,
    /// The type of the replicas' partition column.
    pub partition_type: Option<String>,
}

impl Context {
    pub fn read() -> Context {
        let replicas = crate::catalog::replicas();
        let found = replicas
            .as_ref()
            .and_then(|r| system_catalog::find_relation(&r.relation));
        let partition_type = replicas.as_ref().and_then(|r| {
            let column = r.partition.as_ref()?;
            system_catalog::columns_of(found.as_ref()?.oid)
                .into_iter()
                .find(|c| &c.name == column)
                .map(|c| c.sql_type)
        });
        Context {
            replicas_oid: found.map(|f| f.oid),
            replicas,
            partition_type,
        }
    }
}

/// The key text form's type for a column of this SQL type, if a key may be
/// of it.
pub fn key_type_of(sql_type: &str) -> Option<KeyType> {
    match sql_type {
        "uuid" => Some(KeyType::Uuid),
        "smallint" | "integer" | "bigint" => Some(KeyType::Integer),
        _ => None,
    }
}

fn is_version_type(sql_type: &str) -> bool {
    matches!(
        sql_type,
        "smallint" | "integer" | "bigint" | "timestamp with time zone"
    )
}

/// Collects problems while a table resolves.
struct Checker<'a> {
    shown: String,
    columns: &'a [Column],
    problems: Vec<Problem>,
}

impl Checker<'_> {
    fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    fn add(&mut self, message: impl Into<String>, hint: impl Into<String>) {
        self.problems.push(problem(message, hint));
    }

    /// A column an option names, which must exist; answers it if it does.
    fn named(&mut self, option: &str, name: &str) -> Option<Column> {
        match self.column(name) {
            Some(c) => Some(c.clone()),
            None => {
                let message = format!("magic_sync: {option}: {} has no column {name}", self.shown);
                self.add(
                    message,
                    "Name a column of the table, spelled as it is (names are not folded).",
                );
                None
            }
        }
    }

    /// Refuses a column an option names that another part of the
    /// declaration already has.
    fn not_among(&mut self, option: &str, name: &str, taken: &[(&str, Vec<String>)]) {
        for (what, columns) in taken {
            if columns.iter().any(|c| c == name) {
                let message = format!("magic_sync: {option}: {name} is {what}");
                self.add(message, "A column plays one part in a declaration.");
            }
        }
    }
}

/// Which options a mirror takes, of those that depend on it.
fn allowed(mirror: Mirror, option: &str) -> bool {
    match option {
        "sync" | "active" => mirror.goes_down(),
        "replica_owned" => mirror == Mirror::Both,
        "version" | "created" => matches!(mirror, Mirror::Record | Mirror::Setting),
        "desired" | "apply" => mirror == Mirror::Setting,
        _ => true,
    }
}

fn mirror_hint(mirror: Mirror) -> &'static str {
    match mirror {
        Mirror::Catalog => {
            "A catalog goes down: it takes sync, active, unmirrored and origin; version, created, desired, apply and replica_owned are for tables that go up."
        }
        Mirror::Both => {
            "A table written on both sides takes sync, replica_owned (required), active, unmirrored and origin."
        }
        Mirror::Record => {
            "A record goes up: it takes origin, version, created and unmirrored, and no sync rule."
        }
        Mirror::Setting => {
            "A setting goes up: it takes origin, version and desired (required), apply, created and unmirrored, and no sync rule."
        }
    }
}

/// Resolves one table's request on its own, a named check at a time, each
/// adding what it finds wrong. References, and the reference a follows rule
/// follows, come later (`resolve_all`).
pub fn resolve_one(request: &Request, context: &Context) -> Result<Resolved, Vec<Problem>> {
    let found = table_of(request)?;
    let mirror = mirror_of(request)?;
    let shape = system_catalog::columns_of(found.oid);
    let mut check = Checker {
        shown: found.shown.clone(),
        columns: &shape,
        problems: Vec::new(),
    };
    let mut request = request.clone();
    request.relation = found.qualified.clone();

    check_options_the_mirror_takes(&mut check, &request, mirror);
    let key_columns = key_of(&mut check, &found, &request);
    let key_types = key_types_of(&mut check, &found, &key_columns);
    let name = name_of(&mut check, &request, &found);
    check_origin(&mut check, &request, mirror);
    check_version(&mut check, &request, mirror, &key_columns);
    check_created(&mut check, &request, &key_columns);
    let desired = desired_of(&mut check, &request, mirror, &key_columns);
    let apply = apply_of(&mut check, &request, mirror);
    let partition = partition_of(&mut check, context, &found, mirror);
    let (rule, follows) = rule_of(
        &mut check,
        &mut request,
        &found,
        mirror,
        &key_columns,
        context,
    );
    let active = active_of(&mut check, &mut request, &key_columns, &partition, &rule);
    let replica_owned = replica_owned_of(
        &mut check,
        &request,
        mirror,
        &key_columns,
        &partition,
        &rule,
    );
    let unmirrored = unmirrored_of(
        &mut check,
        &request,
        &found,
        mirror,
        &Taken {
            key_columns: &key_columns,
            desired: &desired,
            replica_owned: &replica_owned,
            partition: &partition,
            rule: &rule,
        },
    );

    let travelling: Vec<&Column> = shape
        .iter()
        .filter(|c| !unmirrored.contains(&c.name))
        .collect();
    let problems = check.problems;
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Resolved {
        table: Declared {
            name,
            relation: found.qualified.clone(),
            mirror,
            rule,
            key_columns,
            key_types,
            columns: travelling.iter().map(|c| c.name.clone()).collect(),
            column_types: travelling.iter().map(|c| c.sql_type.clone()).collect(),
            references: Vec::new(),
            partition,
            origin: request.origin.clone(),
            version: request.version.clone(),
            created: request.created.clone(),
            desired,
            apply,
            replica_owned,
            unmirrored,
            active,
            install: request.install,
            indexes: request.indexes,
            position: 0,
            wishes_of: Vec::new(),
        },
        found,
        shape,
        request,
        follows,
    })
}

/// The table a request names, which must be a table.
fn table_of(request: &Request) -> Result<Relation, Vec<Problem>> {
    let Some(found) = system_catalog::find_relation(&request.relation) else {
        return Err(vec![problem(
            format!("magic_sync: the table {} does not exist", request.relation),
            "Create the table first, then declare it.",
        )]);
    };
    if !found.is_table() {
        return Err(vec![problem(
            format!("magic_sync: {} is not a table", found.shown),
            "Declare the table itself; a view of the rows that travel for their own sake is active => '...'.",
        )]);
    }
    Ok(found)
}

/// Which way the table's rows travel.
fn mirror_of(request: &Request) -> Result<Mirror, Vec<Problem>> {
    Mirror::from_name(&request.mirror).ok_or_else(|| {
        vec![problem(
            format!(
                "magic_sync: mirror => '{}' is none of catalog, record, both, setting",
                request.mirror
            ),
            "mirror says which way a table's rows travel.",
        )]
    })
}

/// Options given that the mirror does not take.
fn check_options_the_mirror_takes(check: &mut Checker, request: &Request, mirror: Mirror) {
    let given = [
        (
            "sync",
            request.sync.is_some() && request.sync.as_deref() != Some("none"),
        ),
        ("active", request.active.is_some()),
        ("replica_owned", request.replica_owned.is_some()),
        ("version", request.version.is_some()),
        ("created", request.created.is_some()),
        ("desired", request.desired.is_some()),
        ("apply", request.apply.is_some()),
    ];
    for (option, is_given) in given {
        if is_given && !allowed(mirror, option) {
            check.add(
                format!(
                    "magic_sync: {option}: mirror => '{}' takes no {option}",
                    mirror.name()
                ),
                mirror_hint(mirror),
            );
        }
    }
}

/// The key's types: uuid and integer columns only.
fn key_types_of(check: &mut Checker, found: &Relation, key_columns: &[String]) -> Vec<KeyType> {
    key_columns
        .iter()
        .filter_map(|name| {
            let column = check.column(name)?.clone();
            let ty = key_type_of(&column.sql_type);
            if ty.is_none() {
                check.add(
                    format!(
                        "magic_sync: the key column {name} of {} is {}; a key is made of uuid and integer columns",
                        found.shown, column.sql_type
                    ),
                    "Key the table by uuid or integer columns.",
                );
            }
            ty
        })
        .collect()
}

/// The name replicas know the table by, which must not be the engine's.
fn name_of(check: &mut Checker, request: &Request, found: &Relation) -> String {
    let name = request.name.clone().unwrap_or_else(|| found.name.clone());
    if name.starts_with("sync_") {
        check.add(
            format!("magic_sync: the name {name} begins with sync_, which is the engine's"),
            "Give the table another name with name => '...'.",
        );
    }
    name
}

/// The origin: a uuid column, which a setting must have.
fn check_origin(check: &mut Checker, request: &Request, mirror: Mirror) {
    if let Some(origin) = &request.origin {
        if let Some(column) = check.named("origin", origin) {
            if column.sql_type != "uuid" {
                check.add(
                    format!(
                        "magic_sync: origin: the column {origin} is {}, and replica ids are uuid",
                        column.sql_type
                    ),
                    "origin names the column of the replica a row belongs to.",
                );
            }
        }
    } else if mirror == Mirror::Setting {
        check.add(
            "magic_sync: origin: a setting needs one",
            "A setting belongs to a replica: name its column of replica ids with origin => '...'.",
        );
    }
}

/// The version: an integer or an instant, of no other part; a setting's
/// must be there.
fn check_version(check: &mut Checker, request: &Request, mirror: Mirror, key_columns: &[String]) {
    if let Some(version) = &request.version {
        if let Some(column) = check.named("version", version) {
            if !is_version_type(&column.sql_type) {
                check.add(
                    format!(
                        "magic_sync: version: the column {version} is {}; a version is an integer or a timestamptz",
                        column.sql_type
                    ),
                    "A version only moves forward: an integer, or an instant (timestamptz).",
                );
            }
            let taken = [
                ("a key column", key_columns.to_vec()),
                ("the origin", request.origin.iter().cloned().collect()),
            ];
            check.not_among("version", version, &taken);
        }
    } else if mirror == Mirror::Setting {
        check.add(
            "magic_sync: version: a setting needs one",
            "Name the column that orders a setting's versions with version => '...' (an integer or a timestamptz).",
        );
    }
}

/// The created column, of no other part.
fn check_created(check: &mut Checker, request: &Request, key_columns: &[String]) {
    if let Some(created) = &request.created {
        if check.named("created", created).is_some() {
            let taken = [
                ("a key column", key_columns.to_vec()),
                ("the version", request.version.iter().cloned().collect()),
                ("the origin", request.origin.iter().cloned().collect()),
            ];
            check.not_among("created", created, &taken);
        }
    }
}

/// The desired columns: a setting has at least one, each named once and
/// of no other part.
fn desired_of(
    check: &mut Checker,
    request: &Request,
    mirror: Mirror,
    key_columns: &[String],
) -> Vec<String> {
    let desired = request.desired.clone().unwrap_or_default();
    if mirror == Mirror::Setting && desired.is_empty() {
        check.add(
            "magic_sync: desired: a setting needs at least one desired column",
            "Name the columns the server may wish other values with desired => '{...}'.",
        );
    }
    for (i, column) in desired.iter().enumerate() {
        if desired[..i].contains(column) {
            check.add(
                format!("magic_sync: desired: {column} is named twice"),
                "Name each column once.",
            );
        } else if check.named("desired", column).is_some() {
            let taken = [
                ("a key column", key_columns.to_vec()),
                ("the version", request.version.iter().cloned().collect()),
                ("the origin", request.origin.iter().cloned().collect()),
            ];
            check.not_among("desired", column, &taken);
        }
    }
    desired
}

/// How a setting takes a wish: always, unless if_unchanged is given.
fn apply_of(check: &mut Checker, request: &Request, mirror: Mirror) -> Option<Apply> {
    match (&request.apply, mirror) {
        (Some(text), _) => match Apply::from_name(text) {
            Some(apply) => Some(apply),
            None => {
                check.add(
                    format!("magic_sync: apply => '{text}' is neither always nor if_unchanged"),
                    "always carries every wish out; if_unchanged only while the replica holds the version the wish is based on.",
                );
                None
            }
        },
        (None, Mirror::Setting) => Some(Apply::Always),
        (None, _) => None,
    }
}

/// The partition column, which every table that goes down carries, of the
/// replicas' type.
fn partition_of(
    check: &mut Checker,
    context: &Context,
    found: &Relation,
    mirror: Mirror,
) -> Option<String> {
    let partition_column = context.replicas.as_ref().and_then(|r| r.partition.clone());
    partition_column.as_ref().and_then(|column| {
        match (check.column(column).cloned(), mirror.goes_down()) {
            (Some(found_column), true) => {
                if let Some(expected) = &context.partition_type {
                    if &found_column.sql_type != expected {
                        check.add(
                            format!(
                                "magic_sync: the partition column {column} of {} is {}, and the replicas' is {expected}",
                                found.shown, found_column.sql_type
                            ),
                            "A row's partition and a replica's are compared: give them the same type.",
                        );
                    }
                }
                Some(column.clone())
            }
            (None, true) => {
                check.add(
                    format!(
                        "magic_sync: {} has no column {column}, and the replicas are partitioned by it",
                        found.shown
                    ),
                    "Every table that goes down carries the partition column: add it to the table.",
                );
                None
            }
            (Some(_), false) => Some(column.clone()),
            (None, false) => None,
        }
    })
}

/// The rule, read and checked against the table; with a follows rule, its
/// columns, whose reference `resolve_all` finds.
fn rule_of(
    check: &mut Checker,
    request: &mut Request,
    found: &Relation,
    mirror: Mirror,
    key_columns: &[String],
    context: &Context,
) -> (Rule, Option<Vec<String>>) {
    let rule_text = match &request.sync {
        None => RuleText::None,
        Some(text) => match rule_text::parse(text) {
            Ok(rule) => rule,
            Err(why) => {
                check.add(
                    format!("magic_sync: sync => '{text}' is no rule: {why}"),
                    "A rule is broadcast, assigned(column), follows(column), grouped(members => ..., assigned => ...) or none.",
                );
                RuleText::None
            }
        },
    };
    let mut follows = None;
    let rule = if !mirror.goes_down() {
        Rule::None
    } else {
        match &rule_text {
            RuleText::None => Rule::None,
            RuleText::Broadcast => Rule::Broadcast,
            RuleText::Assigned(column) => {
                let option = format!("sync => 'assigned({column})'");
                if let Some(c) = check.named(&option, column) {
                    if c.sql_type != "uuid" {
                        check.add(
                            format!("magic_sync: {option}: the column {column} is {}, and replica ids are uuid", c.sql_type),
                            "assigned(...) names the column of the replica a row goes to.",
                        );
                    }
                }
                Rule::Assigned {
                    column: column.clone(),
                }
            }
            RuleText::Follows(columns) => {
                let option = format!("sync => '{}'", rule_text.text());
                for column in columns {
                    check.named(&option, column);
                }
                follows = Some(columns.clone());
                Rule::Follows {
                    columns: columns.clone(),
                    reference: usize::MAX,
                }
            }
            RuleText::Grouped {
                members,
                assigned,
                replica,
            } => match groups(
                check,
                found,
                key_columns,
                context,
                members,
                assigned,
                replica.as_deref(),
            ) {
                Some((members, assigned)) => {
                    request.sync = Some(
                        RuleText::Grouped {
                            members: members.relation.clone(),
                            assigned: assigned.relation.clone(),
                            replica: replica.clone(),
                        }
                        .text(),
                    );
                    Rule::Grouped { members, assigned }
                }
                None => Rule::None,
            },
        }
    };
    (rule, follows)
}

/// The active view: a relation with the table's key, and with the columns
/// the planner reads from it (the partition, the assigned replica).
fn active_of(
    check: &mut Checker,
    request: &mut Request,
    key_columns: &[String],
    partition: &Option<String>,
    rule: &Rule,
) -> Option<String> {
    request.active.clone().and_then(|given| {
        let option = format!("active => '{given}'");
        match system_catalog::find_relation(&given) {
            None => {
                check.add(
                    format!("magic_sync: {option}: there is no such relation"),
                    "Create the view of the rows that travel for their own sake first.",
                );
                None
            }
            Some(view) => {
                let view_columns = system_catalog::columns_of(view.oid);
                for key in key_columns {
                    let ours = check.column(key).map(|c| c.sql_type.clone());
                    match view_columns.iter().find(|c| &c.name == key) {
                        None => check.add(
                            format!("magic_sync: {option}: {} has no column {key}", view.shown),
                            "The view gives the rows of the table that travel for their own sake: it has the table's key.",
                        ),
                        Some(c) if Some(&c.sql_type) != ours.as_ref() => check.add(
                            format!(
                                "magic_sync: {option}: the column {key} of {} is {}, not {}",
                                view.shown,
                                c.sql_type,
                                ours.unwrap_or_default()
                            ),
                            "The view's key columns are the table's.",
                        ),
                        Some(_) => {}
                    }
                }
                // The planner reads a row's partition and the replica it is
                // assigned to from the view too: without them, every pass
                // would fail.
                let assigned = match rule {
                    Rule::Assigned { column } => Some(column),
                    _ => None,
                };
                for column in partition.iter().chain(assigned) {
                    if !view_columns.iter().any(|c| &c.name == column) {
                        check.add(
                            format!("magic_sync: {option}: {} has no column {column}", view.shown),
                            "The planner reads a row's partition and the replica it is assigned to from the view: give it those columns of the table.",
                        );
                    }
                }
                request.active = Some(view.qualified.clone());
                Some(view.qualified)
            }
        }
    })
}

/// The columns replicas own of a table written on both sides: required
/// there, each of no other part.
fn replica_owned_of(
    check: &mut Checker,
    request: &Request,
    mirror: Mirror,
    key_columns: &[String],
    partition: &Option<String>,
    rule: &Rule,
) -> Vec<String> {
    let replica_owned = request.replica_owned.clone().unwrap_or_default();
    if mirror == Mirror::Both && replica_owned.is_empty() {
        check.add(
            "magic_sync: replica_owned: a table written on both sides needs the columns replicas own",
            "Name them with replica_owned => '{...}': they go up, the rest come down.",
        );
    }
    let rule_columns = rule_columns(rule);
    for column in &replica_owned {
        if check.named("replica_owned", column).is_some() {
            let taken = [
                ("a key column", key_columns.to_vec()),
                ("the origin", request.origin.iter().cloned().collect()),
                ("the partition column", partition.iter().cloned().collect()),
                ("the rule's column", rule_columns.clone()),
            ];
            check.not_among("replica_owned", column, &taken);
        }
    }
    replica_owned
}

/// What other parts of a declaration hold, which an unmirrored column may
/// not be.
struct Taken<'a> {
    key_columns: &'a [String],
    desired: &'a [String],
    replica_owned: &'a [String],
    partition: &'a Option<String>,
    rule: &'a Rule,
}

/// The columns that do not travel: of no other part, and, in a table that
/// goes up, never NOT NULL without a default.
fn unmirrored_of(
    check: &mut Checker,
    request: &Request,
    found: &Relation,
    mirror: Mirror,
    taken: &Taken,
) -> Vec<String> {
    let unmirrored = request.unmirrored.clone().unwrap_or_default();
    let rule_columns = rule_columns(taken.rule);
    for column in &unmirrored {
        if let Some(c) = check.named("unmirrored", column) {
            let taken = [
                ("a key column", taken.key_columns.to_vec()),
                ("the origin", request.origin.iter().cloned().collect()),
                ("the version", request.version.iter().cloned().collect()),
                (
                    "the created column",
                    request.created.iter().cloned().collect(),
                ),
                ("a desired column", taken.desired.to_vec()),
                ("a replica-owned column", taken.replica_owned.to_vec()),
                (
                    "the partition column",
                    taken.partition.iter().cloned().collect(),
                ),
                ("the rule's column", rule_columns.clone()),
            ];
            check.not_among("unmirrored", column, &taken);
            if matches!(mirror, Mirror::Record | Mirror::Setting) && c.not_null && !c.has_default {
                check.add(
                    format!("magic_sync: unmirrored: {column} is NOT NULL without a default, and rows of {} come from replicas without it", found.shown),
                    "Give the column a default, or let it travel.",
                );
            }
        }
    }
    unmirrored
}

/// The columns a rule reads of the table.
fn rule_columns(rule: &Rule) -> Vec<String> {
    match rule {
        Rule::Assigned { column } => vec![column.clone()],
        Rule::Follows { columns, .. } => columns.clone(),
        _ => Vec::new(),
    }
}

/// The table's key: its primary key, in the order `key =>` gives when it
/// is given (it must name the primary key's columns).
fn key_of(check: &mut Checker, found: &Relation, request: &Request) -> Vec<String> {
    let primary = system_catalog::primary_key_of(found.oid);
    if primary.is_empty() {
        check.add(
            format!("magic_sync: {} has no primary key", found.shown),
            "A row travels under its primary key: give the table one.",
        );
        return Vec::new();
    }
    let Some(key) = &request.key else {
        return primary;
    };
    let mut ok = true;
    for column in key {
        if check.column(column).is_none() {
            check.add(
                format!("magic_sync: key: {} has no column {column}", found.shown),
                "key => names the columns of the table's primary key.",
            );
            ok = false;
        }
    }
    let (mut a, mut b) = (key.clone(), primary.clone());
    a.sort();
    b.sort();
    if ok && a != b {
        check.add(
            format!(
                "magic_sync: key: ({}) is not the primary key of {} ({})",
                key.join(", "),
                found.shown,
                primary.join(", ")
            ),
            "key => names the columns of the table's primary key, in the order the key is written in.",
        );
    }
    if ok && a == b {
        key.clone()
    } else {
        primary
    }
}

/// A foreign key's columns, reordered to follow `order` (the parent
/// columns' order wanted); None when its parent columns are not `order`'s.
fn reordered(fk: &ForeignKey, order: &[String]) -> Option<Vec<String>> {
    if fk.parent_columns.len() != order.len() {
        return None;
    }
    order
        .iter()
        .map(|p| {
            fk.parent_columns
                .iter()
                .position(|c| c == p)
                .map(|i| fk.columns[i].clone())
        })
        .collect()
}

/// Resolves a grouped rule's two group tables.
#[allow(clippy::too_many_arguments)]
fn groups(
    check: &mut Checker,
    grouped: &Relation,
    key: &[String],
    context: &Context,
    members: &str,
    assigned: &str,
    replica: Option<&str>,
) -> Option<(Members, Assignments)> {
    let option = |which: &str, name: &str| format!("sync => 'grouped(...)': {which} => {name}");
    let find = |check: &mut Checker, which: &str, name: &str| {
        match system_catalog::find_relation_near(name, &grouped.schema) {
            Some(r) if r.is_table() && r.oid != grouped.oid => Some(r),
            Some(r) => {
                check.add(
                format!("magic_sync: {}: {} is not a table of groups", option(which, name), r.shown),
                "members => names the table of which rows are in which groups; assigned => the table of which groups are given to which replicas.",
            );
                None
            }
            None => {
                check.add(
                    format!(
                        "magic_sync: {}: there is no such table",
                        option(which, name)
                    ),
                    "Create the group tables first.",
                );
                None
            }
        }
    };
    let members_table = find(check, "members", members);
    let assigned_table = find(check, "assigned", assigned);
    let (members_table, assigned_table) = (members_table?, assigned_table?);
    if members_table.oid == assigned_table.oid {
        check.add(
            format!(
                "magic_sync: sync => 'grouped(...)': members and assigned are both {}",
                members_table.shown
            ),
            "Members (rows in groups) and assignments (groups given to replicas) are two tables.",
        );
        return None;
    }
    let member_keys = system_catalog::foreign_keys_of(members_table.oid);
    let assigned_keys = system_catalog::foreign_keys_of(assigned_table.oid);

    // The members point at the grouped table by its key.
    let to_grouped: Vec<Vec<String>> = member_keys
        .iter()
        .filter(|fk| fk.parent == grouped.oid)
        .filter_map(|fk| reordered(fk, key))
        .collect();
    let row = match to_grouped.as_slice() {
        [one] => one.clone(),
        [] => {
            check.add(
                format!(
                    "magic_sync: {}: {} has no foreign key to the key of {} ({})",
                    option("members", members),
                    members_table.shown,
                    grouped.shown,
                    key.join(", ")
                ),
                "The members table points at the grouped table by its key, and at the table of groups.",
            );
            return None;
        }
        _ => {
            check.add(
                format!(
                    "magic_sync: {}: {} points at {} by more than one foreign key",
                    option("members", members),
                    members_table.shown,
                    grouped.shown
                ),
                "A row is a member by one foreign key.",
            );
            return None;
        }
    };

    // Both point at one table of groups.
    let mut pairs: Vec<(&ForeignKey, Vec<String>)> = Vec::new();
    for fk in member_keys.iter().filter(|fk| fk.parent != grouped.oid) {
        for other in assigned_keys.iter().filter(|a| a.parent == fk.parent) {
            if let Some(columns) = reordered(other, &fk.parent_columns) {
                pairs.push((fk, columns));
            }
        }
    }
    let (group_key, assigned_group) = match pairs.as_slice() {
        [(fk, columns)] => ((*fk).clone(), columns.clone()),
        [] => {
            check.add(
                format!(
                    "magic_sync: sync => 'grouped(...)': {} and {} point at no table of groups by the same columns",
                    members_table.shown, assigned_table.shown
                ),
                "Both group tables point at the table of groups: give each a foreign key to it.",
            );
            return None;
        }
        _ => {
            check.add(
                format!(
                    "magic_sync: sync => 'grouped(...)': {} and {} point at more than one table of groups",
                    members_table.shown, assigned_table.shown
                ),
                "Both group tables point at one table of groups.",
            );
            return None;
        }
    };
    let groups_table = system_catalog::relation_by_oid(group_key.parent)?;

    // The assignments' column of replica ids.
    let assigned_columns = system_catalog::columns_of(assigned_table.oid);
    let replica_column = match replica {
        Some(column) => Some(column.to_owned()),
        None => {
            let by_key: Vec<&ForeignKey> = assigned_keys
                .iter()
                .filter(|fk| Some(fk.parent) == context.replicas_oid && fk.columns.len() == 1)
                .collect();
            match by_key.as_slice() {
                [one] => Some(one.columns[0].clone()),
                _ => {
                    let uuids: Vec<&Column> = assigned_columns
                        .iter()
                        .filter(|c| c.sql_type == "uuid" && !assigned_group.contains(&c.name))
                        .collect();
                    match uuids.as_slice() {
                        [one] => Some(one.name.clone()),
                        _ => None,
                    }
                }
            }
        }
    };
    let Some(replica_column) = replica_column else {
        check.add(
            format!(
                "magic_sync: {}: which column of {} holds replica ids cannot be told",
                option("assigned", assigned),
                assigned_table.shown
            ),
            format!("Name it: assigned => {}(column).", assigned_table.qualified),
        );
        return None;
    };
    match assigned_columns.iter().find(|c| c.name == replica_column) {
        None => {
            check.add(
                format!(
                    "magic_sync: {}: {} has no column {replica_column}",
                    option("assigned", assigned),
                    assigned_table.shown
                ),
                "Name its column of replica ids.",
            );
            return None;
        }
        Some(c) if c.sql_type != "uuid" => {
            check.add(
                format!(
                    "magic_sync: {}: the column {replica_column} of {} is {}, and replica ids are uuid",
                    option("assigned", assigned),
                    assigned_table.shown,
                    c.sql_type
                ),
                "Name its column of replica ids.",
            );
            return None;
        }
        Some(_) => {}
    }
    Some((
        Members {
            relation: members_table.qualified,
            row,
            group: group_key.columns.clone(),
            groups: groups_table.qualified,
        },
        Assignments {
            relation: assigned_table.qualified,
            group: assigned_group,
            replica: replica_column,
        },
    ))
}

/// The references of one table: its foreign keys to declared tables.
fn references_of(
    table: &Resolved,
    by_oid: &BTreeMap<u32, &Resolved>,
    partition: Option<&str>,
    problems: &mut Vec<Problem>,
) -> Vec<Reference> {
    let mut references = Vec::new();
    for fk in system_catalog::foreign_keys_of(table.found.oid) {
        let Some(parent) = by_oid.get(&fk.parent.to_u32()) else {
            continue;
        };
        let parent_key = &parent.table.key_columns;
        // The partition column on both sides is "the same partition", which
        // no row crosses anyway, unless the parent's key holds it.
        let pairs: Vec<(String, String)> = fk
            .columns
            .iter()
            .cloned()
            .zip(fk.parent_columns.iter().cloned())
            .filter(|(child, parent_column)| {
                !(Some(child.as_str()) == partition
                    && Some(parent_column.as_str()) == partition
                    && !parent_key.iter().any(|k| Some(k.as_str()) == partition))
            })
            .collect();
        if pairs.is_empty() {
            continue;
        }
        let columns: Option<Vec<String>> = parent_key
            .iter()
            .map(|k| pairs.iter().find(|(_, p)| p == k).map(|(c, _)| c.clone()))
            .collect();
        match columns {
            Some(columns) if pairs.len() == parent_key.len() => references.push(Reference {
                constraint: fk.name.clone(),
                columns,
                parent: parent.table.name.clone(),
                parent_columns: parent_key.clone(),
                key_types: parent.table.key_types.clone(),
            }),
            _ => problems.push(problem(
                format!(
                    "magic_sync: the foreign key {} of {} points at {} by ({}), which is not its key ({})",
                    fk.name,
                    table.found.shown,
                    parent.found.shown,
                    pairs.iter().map(|(_, p)| p.as_str()).collect::<Vec<_>>().join(", "),
                    parent_key.join(", ")
                ),
                "A row points at a declared table by that table's key: change the foreign key, or the parent's key.",
            )),
        }
    }
    references
}

/// Resolves every declaration together: each on its own, then their
/// references, follows rules and order. Answers them parents first.
pub fn resolve_all(requests: &[Request]) -> Result<Vec<Resolved>, Vec<Problem>> {
    let context = Context::read();
    let mut problems = Vec::new();
    let mut resolved = Vec::new();
    for request in requests {
        match resolve_one(request, &context) {
            Ok(r) => resolved.push(r),
            Err(mut p) => problems.append(&mut p),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    check_names(&resolved, &mut problems);
    let partition = context.replicas.as_ref().and_then(|r| r.partition.clone());
    let by_oid: BTreeMap<u32, &Resolved> =
        resolved.iter().map(|r| (r.found.oid.to_u32(), r)).collect();
    let references: Vec<Vec<Reference>> = resolved
        .iter()
        .map(|r| references_of(r, &by_oid, partition.as_deref(), &mut problems))
        .collect();
    for (table, references) in resolved.iter_mut().zip(references) {
        table.table.references = references;
        link_follows(table, &mut problems);
        check_reference_columns(table, &mut problems);
    }
    check_group_tables(&resolved, &mut problems);
    let order = order(&resolved, &mut problems);
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut ordered: Vec<Resolved> = Vec::new();
    for (position, name) in order.iter().enumerate() {
        let mut table = resolved
            .iter()
            .find(|r| &r.table.name == name)
            .expect("an ordered table")
            .clone();
        table.table.position = position as i32 + 1;
        ordered.push(table);
    }
    Ok(ordered)
}

/// No two declarations of one table, or under one name.
fn check_names(resolved: &[Resolved], problems: &mut Vec<Problem>) {
    for (i, a) in resolved.iter().enumerate() {
        for b in &resolved[..i] {
            if a.table.name == b.table.name {
                problems.push(problem(
                    format!(
                        "magic_sync: the name {} is taken by {}",
                        a.table.name, b.found.shown
                    ),
                    "Give the table another name with name => '...'.",
                ));
            }
        }
    }
}

/// A follows rule follows the reference whose columns it names.
fn link_follows(table: &mut Resolved, problems: &mut Vec<Problem>) {
    let Some(columns) = table.follows.clone() else {
        return;
    };
    let reference = crate::catalog::followed(&table.table.references, &columns);
    let option = format!("sync => '{}'", RuleText::Follows(columns.clone()).text());
    if reference == usize::MAX {
        problems.push(problem(
            format!(
                "magic_sync: {option}: ({}) is no foreign key of {} to a declared table",
                columns.join(", "),
                table.found.shown
            ),
            "follows(...) names the columns of a foreign key to the table whose rows these go with: declare that table first.",
        ));
    } else if table.table.references[reference].parent == table.table.name {
        problems.push(problem(
            format!(
                "magic_sync: {option}: {} would follow itself",
                table.found.shown
            ),
            "A row follows a row of another table.",
        ));
    }
    table.table.rule = Rule::Follows { columns, reference };
}

/// The columns that point at other declared tables are not the replica's
/// to write, and travel.
fn check_reference_columns(table: &Resolved, problems: &mut Vec<Problem>) {
    for reference in &table.table.references {
        for column in &reference.columns {
            for (option, columns) in [
                ("replica_owned", &table.table.replica_owned),
                ("unmirrored", &table.table.unmirrored),
            ] {
                if columns.contains(column) {
                    problems.push(problem(
                        format!(
                            "magic_sync: {option}: {column} points at {} (the foreign key {})",
                            reference.parent, reference.constraint
                        ),
                        "A column that points at another declared table travels down with the row.",
                    ));
                }
            }
        }
    }
}

/// A members table serves one grouped table; a table is one kind of group
/// table only.
fn check_group_tables(resolved: &[Resolved], problems: &mut Vec<Problem>) {
    let mut roles: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for r in resolved {
        if let Rule::Grouped { members, assigned } = &r.table.rule {
            roles
                .entry(&members.relation)
                .or_default()
                .push(("members", &r.table.name));
            roles
                .entry(&assigned.relation)
                .or_default()
                .push(("assigned", &r.table.name));
        }
    }
    for (relation, uses) in roles {
        let kinds: BTreeSet<&str> = uses.iter().map(|(k, _)| *k).collect();
        let members = uses.iter().filter(|(k, _)| *k == "members").count();
        if kinds.len() > 1 || members > 1 {
            problems.push(problem(
                format!(
                    "magic_sync: {} is a group table of {}",
                    system_catalog::shown(relation),
                    uses.iter()
                        .map(|(k, t)| format!("{t} ({k})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "A members table serves one grouped table; a table of assignments may serve several.",
            ));
        }
        if resolved.iter().any(|r| r.table.relation == relation) {
            problems.push(problem(
                format!(
                    "magic_sync: {} is declared, and a group table too",
                    system_catalog::shown(relation)
                ),
                "A group table says which rows go where; it does not travel itself.",
            ));
        }
    }
}

/// Parents before children, ties by name; a cycle of foreign keys between
/// tables (not a table and itself) is a problem naming them.
fn order(resolved: &[Resolved], problems: &mut Vec<Problem>) -> Vec<String> {
    let mut parents: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in resolved {
        let entry = parents.entry(&r.table.name).or_default();
        for reference in &r.table.references {
            if reference.parent != r.table.name {
                entry.insert(&reference.parent);
            }
        }
    }
    let mut ordered: Vec<String> = Vec::new();
    loop {
        let ready: Option<&str> = parents
            .iter()
            .find(|(_, p)| p.is_empty())
            .map(|(name, _)| *name);
        let Some(name) = ready else { break };
        parents.remove(name);
        for p in parents.values_mut() {
            p.remove(name);
        }
        ordered.push(name.to_owned());
    }
    if !parents.is_empty() {
        problems.push(problem(
            format!(
                "magic_sync: the foreign keys of {} make a cycle",
                parents.keys().copied().collect::<Vec<_>>().join(", ")
            ),
            "A replica holds a row only with the rows it points at, so a cycle of tables cannot be sent: leave one of them undeclared, or break the cycle.",
        ));
    }
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_back_from_its_json() {
        let request = Request {
            relation: "\"shop\".\"footers\"".into(),
            mirror: "setting".into(),
            origin: Some("register_id".into()),
            desired: Some(vec!["text".into()]),
            install: false,
            indexes: true,
            ..Request::default()
        };
        assert_eq!(Request::from_json(request.to_json()).unwrap(), request);
    }

    #[test]
    fn a_request_prints_the_call_that_makes_it() {
        let request = Request {
            relation: "\"shop\".\"footers\"".into(),
            mirror: "setting".into(),
            origin: Some("register_id".into()),
            version: Some("changed_at".into()),
            desired: Some(vec!["text".into(), "it's".into()]),
            apply: Some("if_unchanged".into()),
            install: false,
            indexes: true,
            ..Request::default()
        };
        assert_eq!(
            request.call(),
            "SELECT sync.declare_table('\"shop\".\"footers\"', mirror => 'setting', \
             origin => 'register_id', version => 'changed_at', apply => 'if_unchanged', \
             desired => '{\"text\",\"it''s\"}', install => false);"
        );
    }

    #[test]
    fn a_foreign_key_is_read_in_the_order_of_the_columns_it_points_at() {
        let fk = ForeignKey {
            name: "f".into(),
            columns: vec!["region_id".into(), "company".into()],
            parent: pgrx::pg_sys::Oid::INVALID,
            parent_columns: vec!["id".into(), "company_id".into()],
        };
        assert_eq!(
            reordered(&fk, &["company_id".into(), "id".into()]),
            Some(vec!["company".into(), "region_id".into()])
        );
        assert_eq!(reordered(&fk, &["id".into()]), None);
    }
}
