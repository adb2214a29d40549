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

    #[pg_test]
    fn several_commands_in_one_text_are_run_as_they_are() {
        scratch::begin();
        let both = "DELETE FROM sync_pass_want; DELETE FROM sync_pass_current";
        spi::run(both);
        assert!(!spi::is_kept(both));
    }
}
