//! `sync.desire` and `sync.withdraw`: a wish written, replaced or taken
//! back in `sync.sync_wishes`, in the caller's transaction. Its note
//! trigger notes the change, and the next pass sends it to the replica the
//! setting row belongs to (its origin), or takes it back.

use magic_sync_proto::json::{read_int64, read_uuid};
use magic_sync_proto::key::{self, KeyPart, KeyType};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::catalog::table_sql::{key_matches, quote_ident};
use crate::catalog::{self, Apply, Declared, Mirror};
use crate::error::Error;
use crate::seal;
use crate::spi::{self, from_pg, to_pg};
use crate::statements::wishes::desire::{TAKE_BACK, VALUES_REFUSED, WRITE_WISH};

/// A wish read from what `sync.desire` was given.
#[derive(Clone, Debug, PartialEq)]
pub struct Wished {
    /// The row's key, in the key text form.
    pub key: String,
    /// The desired columns and their values.
    pub wanted: Map<String, Value>,
    /// Under if_unchanged, the version the wish is based on.
    pub based_on: Option<Value>,
}

/// The setting a wish is of, or an error naming what the table is.
fn setting_named(table_name: &str) -> Declared {
    let tables = catalog::declared_tables();
    let settings: Vec<&str> = tables
        .iter()
        .filter(|t| t.mirror == Mirror::Setting)
        .map(|t| t.name.as_str())
        .collect();
    let hint = if settings.is_empty() {
        "No table is declared a setting: declare one with mirror => 'setting' and desired => '{...}'.".to_owned()
    } else {
        format!("The settings are {}.", settings.join(", "))
    };
    match tables.iter().find(|t| t.name == table_name) {
        Some(t) if t.mirror == Mirror::Setting => t.clone(),
        Some(t) => Error::bad_input(
            format!(
                "magic_sync: {table_name} is not a setting (it is declared mirror => '{}'): only a setting is wished",
                t.mirror.name()
            ),
            hint,
        )
        .raise(),
        None => Error::bad_input(
            format!("magic_sync: {table_name} is not a setting: no table is declared by that name"),
            hint,
        )
        .raise(),
    }
}

/// One part of a key, as a JSON value holds it.
fn key_part(value: &Value, ty: KeyType) -> Option<KeyPart> {
    match ty {
        KeyType::Uuid => read_uuid(value).ok().map(KeyPart::Uuid),
        KeyType::Integer => read_int64(value).ok().map(KeyPart::Integer),
    }
}

/// Reads a wish of `setting` from what the caller gave: the row's key
/// columns, the desired columns, and under if_unchanged the version column.
/// Every problem is named.
pub fn read_wished(setting: &Declared, given: &Value) -> Result<Wished, Error> {
    let name = &setting.name;
    let Value::Object(given) = given else {
        return Err(Error::bad_input(
            format!("magic_sync: a wish of {name} is a JSON object of the row's columns, not {given}"),
            "Give the key columns, the desired columns to set, and under apply => 'if_unchanged' the version the wish is based on.",
        ));
    };
    let if_unchanged = setting.apply == Some(Apply::IfUnchanged);
    let version = setting.version.as_deref();
    let mut wanted = Map::new();
    let mut based_on = None;
    for (column, value) in given {
        if setting.key_columns.contains(column) || setting.origin.as_ref() == Some(column) {
            continue;
        }
        if setting.desired.contains(column) {
            wanted.insert(column.clone(), value.clone());
        } else if Some(column.as_str()) == version {
            // The row as the operator saw it carries its version: under
            // always no wish is based on it.
            if if_unchanged {
                based_on = Some(value.clone()).filter(|v| !v.is_null());
            }
        } else {
            let what = if setting.columns.contains(column) {
                "is not desired"
            } else {
                "is no column of it"
            };
            return Err(Error::bad_input(
                format!("magic_sync: {column} of {name} {what}: a wish sets only its desired columns ({})", setting.desired.join(", ")),
                "Give the key columns and the desired columns to set (and under apply => 'if_unchanged' the version the wish is based on), nothing else.",
            ));
        }
    }
    if wanted.is_empty() {
        return Err(Error::bad_input(
            format!(
                "magic_sync: a wish of {name} sets none of its desired columns ({})",
                setting.desired.join(", ")
            ),
            "Give the values wished of one or more desired columns.",
        ));
    }
    if let Some(version) = version.filter(|_| if_unchanged) {
        if based_on.is_none() {
            return Err(Error::bad_input(
                format!("magic_sync: a wish of {name} is based on a version (apply => 'if_unchanged'), and {version} is missing"),
                format!("Give {version} as the row showed it when the wish was made: the replica carries the wish out only while the row is at that version."),
            ));
        }
    }
    let mut parts = Vec::new();
    for (column, ty) in setting.key_columns.iter().zip(&setting.key_types) {
        let Some(value) = given.get(column).filter(|v| !v.is_null()) else {
            return Err(Error::bad_input(
                format!("magic_sync: a wish of {name} names its row by its key, and {column} is missing"),
                format!("Give the key columns ({}).", setting.key_columns.join(", ")),
            ));
        };
        let Some(part) = key_part(value, *ty) else {
            return Err(Error::bad_input(
                format!(
                    "magic_sync: {column} of a wish of {name} is no {} key: {value}",
                    ty.name()
                ),
                "A uuid key is its text; an integer key a number or its decimal text.",
            ));
        };
        parts.push(part);
    }
    Ok(Wished {
        key: key::join(&parts),
        wanted,
        based_on,
    })
}

/// The replica the setting row `key` belongs to, or an error naming a key
/// of no row.
fn replica_of_row(setting: &Declared, key: &str) -> Uuid {
    let origin = setting.origin.as_deref().unwrap_or_else(|| {
        Error::engine(
            format!("magic_sync: the setting {} has no origin", setting.name),
            "",
        )
        .raise()
    });
    let sql = format!(
        "SELECT t.{origin} FROM {rel} AS t WHERE {matches}",
        origin = quote_ident(origin),
        rel = setting.relation,
        matches = key_matches(setting, "t", "$1"),
    );
    let found: Option<pgrx::Uuid> = spi::one(&sql, &[key.into()]);
    match found {
        Some(replica) => from_pg(replica),
        None => Error::bad_input(
            format!(
                "magic_sync: {} has no row of key {key}: a wish is of a row the replica reported",
                setting.name
            ),
            format!(
                "SELECT * FROM {} lists the rows the replicas reported.",
                setting.relation
            ),
        )
        .raise(),
    }
}

/// The values given read as the setting's columns, or an error naming the
/// one its column's type does not take.
fn check_values(setting: &Declared, wished: &Wished) {
    let mut row = wished.wanted.clone();
    if let (Some(version), Some(value)) = (&setting.version, &wished.based_on) {
        row.insert(version.clone(), value.clone());
    }
    let refused: Option<String> = spi::one(
        VALUES_REFUSED,
        &[
            setting.relation.as_str().into(),
            pgrx::JsonB(Value::Object(row)).into(),
        ],
    );
    if let Some(why) = refused {
        Error::bad_input(
            format!("magic_sync: a wish of {} holds a value its column does not take: {why}", setting.name),
            "Give each value as the JSON row conventions write the column's type (a 64-bit integer as its decimal text, an instant as RFC 3339).",
        )
        .raise();
    }
}

/// `sync.desire(table_name, wanted, note)`: wishes the row of the setting
/// `table_name` that `wanted` names the values it gives; answers the wish's
/// id. A row wished again has its wish replaced, under a new version.
pub fn desire(table_name: &str, wanted: &Value, note: Option<&str>) -> Uuid {
    let setting = setting_named(table_name);
    let wished = read_wished(&setting, wanted).unwrap_or_else(|e| e.raise());
    let replica = replica_of_row(&setting, &wished.key);
    check_values(&setting, &wished);
    let version = seal::draw_nonce() as i64;
    let id: Option<pgrx::Uuid> = spi::one(
        WRITE_WISH,
        &[
            to_pg(replica).into(),
            table_name.into(),
            wished.key.as_str().into(),
            pgrx::JsonB(Value::Object(wished.wanted)).into(),
            wished.based_on.map(pgrx::JsonB).into(),
            version.into(),
            note.into(),
        ],
    );
    from_pg(id.unwrap_or_else(|| {
        Error::engine("magic_sync: a wish written answered no id", WRITE_WISH).raise()
    }))
}

/// `sync.withdraw(table_name, key)`: takes back the wish of the setting
/// row `key`; answers whether there was one.
pub fn withdraw(table_name: &str, key: &str) -> bool {
    let setting = setting_named(table_name);
    let key = key::canonical(key, &setting.key_types).unwrap_or_else(|e| {
        Error::bad_input(
            format!("magic_sync: {key} is no key of {table_name}: {e}"),
            "A key is its parts in the key text form, joined by |.",
        )
        .raise()
    });
    spi::one::<i64>(TAKE_BACK, &[table_name.into(), key.as_str().into()]).unwrap_or(0) > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::table_sql::qualified;
    use serde_json::json;

    const REGISTER: &str = "01960000-0000-7000-8000-0000000000aa";

    fn footers(apply: Apply) -> Declared {
        Declared {
            name: "footers".into(),
            relation: qualified("shop", "footers"),
            mirror: Mirror::Setting,
            key_columns: vec!["register_id".into()],
            key_types: vec![KeyType::Uuid],
            columns: vec![
                "register_id".into(),
                "text".into(),
                "changed_at".into(),
                "printed".into(),
            ],
            column_types: vec![
                "uuid".into(),
                "text".into(),
                "timestamp with time zone".into(),
                "bigint".into(),
            ],
            origin: Some("register_id".into()),
            version: Some("changed_at".into()),
            desired: vec!["text".into()],
            apply: Some(apply),
            ..Declared::default()
        }
    }

    fn message(e: Error) -> String {
        e.to_string()
    }

    #[test]
    fn a_wish_is_its_desired_columns_and_the_version_it_is_based_on() {
        let wished = read_wished(
            &footers(Apply::IfUnchanged),
            &json!({"register_id": REGISTER.to_uppercase(), "text": "Thanks", "changed_at": "2026-10-12T10:00:00Z"}),
        )
        .unwrap();
        assert_eq!(wished.key, REGISTER);
        assert_eq!(Value::Object(wished.wanted), json!({"text": "Thanks"}));
        assert_eq!(wished.based_on, Some(json!("2026-10-12T10:00:00Z")));
    }

    #[test]
    fn a_column_that_is_not_desired_is_refused_by_name() {
        let e = message(
            read_wished(
                &footers(Apply::Always),
                &json!({"register_id": REGISTER, "text": "a", "printed": 3}),
            )
            .unwrap_err(),
        );
        assert!(e.contains("printed of footers is not desired"), "{e}");
        let e = message(
            read_wished(
                &footers(Apply::Always),
                &json!({"register_id": REGISTER, "colour": 3}),
            )
            .unwrap_err(),
        );
        assert!(e.contains("colour of footers is no column of it"), "{e}");
    }

    #[test]
    fn under_always_the_version_of_the_row_as_seen_is_taken_and_no_wish_is_based_on_it() {
        let wished = read_wished(
            &footers(Apply::Always),
            &json!({"register_id": REGISTER, "text": "a", "changed_at": "2026-10-12T10:00:00Z"}),
        )
        .unwrap();
        assert_eq!(Value::Object(wished.wanted), json!({"text": "a"}));
        assert_eq!(wished.based_on, None);
    }

    #[test]
    fn a_version_missing_under_if_unchanged_is_refused_by_name() {
        let e = message(
            read_wished(
                &footers(Apply::IfUnchanged),
                &json!({"register_id": REGISTER, "text": "a"}),
            )
            .unwrap_err(),
        );
        assert!(e.contains("changed_at is missing"), "{e}");
    }

    #[test]
    fn a_wish_names_its_row_by_a_key_of_the_table() {
        let e = message(read_wished(&footers(Apply::Always), &json!({"text": "a"})).unwrap_err());
        assert!(e.contains("register_id is missing"), "{e}");
        let e = message(
            read_wished(
                &footers(Apply::Always),
                &json!({"register_id": "nope", "text": "a"}),
            )
            .unwrap_err(),
        );
        assert!(
            e.contains("register_id of a wish of footers is no uuid key"),
            "{e}"
        );
        let e = message(
            read_wished(&footers(Apply::Always), &json!({"register_id": REGISTER})).unwrap_err(),
        );
        assert!(e.contains("sets none of its desired columns"), "{e}");
    }
}
