//! The states progress counts in Rust (status/row_state.rs) against the
//! states `sync_internal.row_state` names in SQL for the reads of one row:
//! every combination of their inputs, so the two reads always agree.

#[pgrx::pg_schema]
#[allow(clippy::module_inception)]
mod tests {
    use pgrx::prelude::*;

    use crate::status::row_state::{row_state, Held};

    /// Every combination of a row's inputs, for a replica that confirmed
    /// message 10 of its epoch (5 is confirmed, 50 is not); the held
    /// columns are NULL where the row is not held, as sync.held gives them.
    const GRID: &str = "
        WITH grid AS (
            SELECT should, blocked, held,
                   CASE WHEN held THEN refused END AS refused,
                   CASE WHEN held THEN sent END AS sent,
                   CASE WHEN held THEN leaving END AS leaving,
                   CASE WHEN held THEN note END AS note,
                   newest, '00000000-0000-0000-0000-0000000000e1'::uuid AS epoch
            FROM (VALUES (true), (false)) AS a(should),
                 (VALUES (true), (false)) AS b(blocked),
                 (VALUES (true), (false)) AS c(held),
                 (VALUES (NULL::text), ('no room')) AS d(refused),
                 (VALUES (5::bigint), (50)) AS s(sent),
                 (VALUES (NULL::bigint), (5), (50)) AS l(leaving),
                 (VALUES (NULL::bigint), (3)) AS n(note),
                 (VALUES (NULL::bigint), (2), (4)) AS w(newest))
        SELECT should, blocked, held, refused IS NOT NULL, leaving IS NOT NULL,
               coalesce(sync_internal.confirmed(sent, epoch, epoch, 10), false),
               coalesce(sync_internal.confirmed(leaving, epoch, epoch, 10), false),
               note, newest,
               sync_internal.row_state(should, blocked, held, refused, sent, leaving,
                                       note, newest, epoch, epoch, 10)
        FROM grid";

    #[pg_test]
    fn rust_names_every_combination_of_a_rows_inputs_as_sql_does() {
        let mut compared = 0;
        Spi::connect(|client| {
            for row in client.select(GRID, None, &[]).unwrap() {
                let flag = |i| row.get::<bool>(i).unwrap().unwrap();
                let number = |i| row.get::<i64>(i).unwrap();
                let (should, blocked, is_held) = (flag(1), flag(2), flag(3));
                let held = Held {
                    refused: flag(4),
                    leaving: flag(5),
                    sent_confirmed: flag(6),
                    leaving_confirmed: flag(7),
                    note: number(8),
                };
                let newest = number(9);
                let in_sql = row.get::<String>(10).unwrap();
                let in_rust = row_state(should, blocked, is_held.then_some(&held), newest)
                    .map(|state| state.name().to_owned());
                assert_eq!(
                    in_rust, in_sql,
                    "should {should}, blocked {blocked}, held {is_held}: {held:?}, newest {newest:?}"
                );
                compared += 1;
            }
        });
        assert_eq!(compared, 2 * 2 * 2 * 2 * 2 * 3 * 2 * 3);
    }
}
