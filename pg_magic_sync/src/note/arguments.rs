//! What a trigger notes, as its arguments say: written from the
//! declaration (`declare/triggers.rs` makes the DDL), read back by the
//! trigger when it fires. Each list is written after its length.

/// How a table's rows are noted: the arguments of its `sync.note_row`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowNoting<'a> {
    /// The table's name, as replicas know it.
    pub table: &'a str,
    /// The partition column, when the replicas are partitioned.
    pub partition: Option<&'a str>,
    pub key: Vec<&'a str>,
    /// Per reference to another declared table, its columns in the order of
    /// the parent's key: what the row pointed at before a change is noted
    /// as that parent's key.
    pub references: Vec<Vec<&'a str>>,
    /// Columns a change of which alone is not noted: the replica's own and
    /// those that do not travel.
    pub unnoted: Vec<&'a str>,
}

/// How a group table's rows are noted: the arguments of its
/// `sync.note_group`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupNoting<'a> {
    /// A grouped table's members: a row joining or leaving a group.
    Members {
        /// The grouped table, as replicas know it.
        grouped: &'a str,
        /// The columns that point at the group.
        group: Vec<&'a str>,
        /// The columns that point at the grouped row, in its key's order.
        row: Vec<&'a str>,
    },
    /// Groups given to replicas: a group given to or taken from one.
    Assignments {
        /// The column of replica ids.
        replica: &'a str,
        group: Vec<&'a str>,
        /// Every grouped table whose groups these are.
        grouped: Vec<&'a str>,
    },
}

/// Appends a list after its length.
fn push_list(args: &mut Vec<String>, list: &[&str]) {
    args.push(list.len().to_string());
    args.extend(list.iter().map(|s| (*s).to_owned()));
}

/// Reads a list written by `push_list`, moving past it.
fn take_list<'a>(args: &mut &[&'a str]) -> Option<Vec<&'a str>> {
    let (count, rest) = args.split_first()?;
    let count: usize = count.parse().ok()?;
    if rest.len() < count {
        return None;
    }
    let (list, rest) = rest.split_at(count);
    *args = rest;
    Some(list.to_vec())
}

fn take_one<'a>(args: &mut &[&'a str]) -> Option<&'a str> {
    let (first, rest) = args.split_first()?;
    *args = rest;
    Some(first)
}

impl<'a> RowNoting<'a> {
    /// The trigger's arguments: the name, the partition column ('' for
    /// none), the key, the references (how many, then each as a list) and
    /// the unnoted columns.
    pub fn arguments(&self) -> Vec<String> {
        let mut args = vec![
            self.table.to_owned(),
            self.partition.unwrap_or("").to_owned(),
        ];
        push_list(&mut args, &self.key);
        args.push(self.references.len().to_string());
        for reference in &self.references {
            push_list(&mut args, reference);
        }
        push_list(&mut args, &self.unnoted);
        args
    }

    pub fn parse(mut args: &[&'a str]) -> Option<RowNoting<'a>> {
        let table = take_one(&mut args)?;
        let partition = Some(take_one(&mut args)?).filter(|p| !p.is_empty());
        let key = take_list(&mut args)?;
        let count: usize = take_one(&mut args)?.parse().ok()?;
        let references = (0..count)
            .map(|_| take_list(&mut args))
            .collect::<Option<Vec<_>>>()?;
        let unnoted = take_list(&mut args)?;
        (args.is_empty() && !key.is_empty()).then_some(RowNoting {
            table,
            partition,
            key,
            references,
            unnoted,
        })
    }
}

impl<'a> GroupNoting<'a> {
    pub fn arguments(&self) -> Vec<String> {
        let mut args = Vec::new();
        match self {
            GroupNoting::Members {
                grouped,
                group,
                row,
            } => {
                args.push("members".to_owned());
                args.push((*grouped).to_owned());
                push_list(&mut args, group);
                push_list(&mut args, row);
            }
            GroupNoting::Assignments {
                replica,
                group,
                grouped,
            } => {
                args.push("assigned".to_owned());
                args.push((*replica).to_owned());
                push_list(&mut args, group);
                push_list(&mut args, grouped);
            }
        }
        args
    }

    pub fn parse(mut args: &[&'a str]) -> Option<GroupNoting<'a>> {
        let noting = match take_one(&mut args)? {
            "members" => GroupNoting::Members {
                grouped: take_one(&mut args)?,
                group: take_list(&mut args)?,
                row: take_list(&mut args)?,
            },
            "assigned" => GroupNoting::Assignments {
                replica: take_one(&mut args)?,
                group: take_list(&mut args)?,
                grouped: take_list(&mut args)?,
            },
            _ => return None,
        };
        args.is_empty().then_some(noting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_trigger_s_arguments_read_back_as_written() {
        let noting = RowNoting {
            table: "stores",
            partition: Some("company_id"),
            key: vec!["id"],
            references: vec![vec!["region_id"], vec!["company_id", "owner_id"]],
            unnoted: vec!["battery"],
        };
        let args = noting.arguments();
        assert_eq!(
            args,
            [
                "stores",
                "company_id",
                "1",
                "id",
                "2",
                "1",
                "region_id",
                "2",
                "company_id",
                "owner_id",
                "1",
                "battery"
            ]
        );
        let borrowed: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(RowNoting::parse(&borrowed), Some(noting));
    }

    #[test]
    fn a_table_without_partition_references_or_unnoted_columns_has_short_arguments() {
        let noting = RowNoting {
            table: "products",
            partition: None,
            key: vec!["id"],
            references: vec![],
            unnoted: vec![],
        };
        assert_eq!(noting.arguments(), ["products", "", "1", "id", "0", "0"]);
        assert_eq!(
            RowNoting::parse(&["products", "", "1", "id", "0", "0"]),
            Some(noting)
        );
    }

    #[test]
    fn arguments_that_are_not_the_engine_s_do_not_parse() {
        assert_eq!(RowNoting::parse(&["products", "", "1"]), None);
        assert_eq!(
            RowNoting::parse(&["products", "", "0", "0", "0"]),
            None,
            "no key"
        );
        assert_eq!(
            RowNoting::parse(&["products", "", "1", "id", "0", "0", "extra"]),
            None
        );
        assert_eq!(
            RowNoting::parse(&["products", "", "x", "id", "0", "0"]),
            None
        );
        assert_eq!(GroupNoting::parse(&["lists", "x"]), None);
    }

    #[test]
    fn group_triggers_arguments_read_back_as_written() {
        for noting in [
            GroupNoting::Members {
                grouped: "customers",
                group: vec!["list_id"],
                row: vec!["customer_id"],
            },
            GroupNoting::Assignments {
                replica: "register_id",
                group: vec!["list_id"],
                grouped: vec!["customers", "products"],
            },
        ] {
            let args = noting.arguments();
            let borrowed: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_eq!(GroupNoting::parse(&borrowed), Some(noting));
        }
    }
}
