//! Plans kept for the session (spi.rs), inside a backend: a statement over
//! the pass's scratch tables keeps its plan while the tables it reads are
//! small, and is planned for its size once one of them is large.

#[pgrx::pg_schema]
#[allow(clippy::module_inception)]
mod tests {
    use pgrx::prelude::*;

    use crate::relay::scratch;
    use crate::spi;

    const FILL: &str = "INSERT INTO sync_pass_want \
        SELECT NULL, 'products', i::text FROM generate_series(1, 20000) AS i";

    #[pg_test]
    fn a_statement_over_small_scratch_tables_keeps_its_plan() {
        scratch::begin();
        let counting =
            "SELECT count(*) FROM sync_pass_want w JOIN sync_pass_current c ON c.id = w.replica";
        assert_eq!(spi::one::<i64>(counting, &[]), Some(0));
        assert!(spi::is_kept(counting));
    }

    #[pg_test]
    fn a_statement_over_a_large_scratch_table_is_planned_each_time_and_answers_for_its_rows() {
        scratch::begin();
        let counting = "SELECT count(*) FROM sync_pass_want WHERE table_name = 'products'";
        assert_eq!(spi::one::<i64>(counting, &[]), Some(0));
        assert!(spi::is_kept(counting));
        spi::run(FILL);
        let other = "SELECT count(*) FROM sync_pass_want WHERE replica IS NULL";
        assert_eq!(spi::one::<i64>(other, &[]), Some(20_000));
        assert!(!spi::is_kept(other), "planned for 20,000 rows, not kept");
        // The plan kept while the table was small is not the one run now.
        assert_eq!(spi::one::<i64>(counting, &[]), Some(20_000));
    }

    /// The plan PostgreSQL makes for a look-up by key in `t`.
    fn plan_of_a_look_up() -> String {
        spi::select("EXPLAIN SELECT * FROM t WHERE id = 5", None, &[], |rows| {
            rows.map(|row| spi::column::<String>(&row, 1, "a line of the plan"))
                .collect::<Vec<_>>()
                .join(" ")
        })
    }

    #[pg_test]
    fn a_table_read_whole_leaves_index_scans_to_what_runs_beside_it() {
        spi::run(
            "CREATE TABLE t (id int PRIMARY KEY, v text); \
             INSERT INTO t SELECT i, 'v' FROM generate_series(1, 20000) AS i; ANALYZE t",
        );
        let mut plans = Vec::new();
        spi::for_each_chunk_scanning_pages(
            "SELECT id FROM t ORDER BY id",
            5_000,
            |row| spi::column::<i32>(row, 1, "t.id"),
            |ids| plans.push((ids.len(), plan_of_a_look_up())),
        );
        assert_eq!(plans.len(), 4, "20,000 rows in chunks of 5,000");
        for (rows, plan) in plans {
            assert_eq!(rows, 5_000);
            assert!(
                plan.contains("Index Scan using"),
                "planned beside the read: {plan}"
            );
        }
        assert!(plan_of_a_look_up().contains("Index Scan using"));
    }

    #[pg_test]
    fn several_commands_in_one_text_are_run_as_they_are() {
        scratch::begin();
        let both = "DELETE FROM sync_pass_want; DELETE FROM sync_pass_current";
        spi::run(both);
        assert!(!spi::is_kept(both));
    }
}
