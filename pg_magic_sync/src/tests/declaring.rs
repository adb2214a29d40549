//! Tests of declarations and noting that run inside a backend (`cargo pgrx
//! test`): what the relay reads back, the digest, the relay's check, and
//! the note trigger's two ways of writing a note.

#[pgrx::pg_schema]
#[allow(clippy::module_inception)]
mod tests {
    use pgrx::prelude::*;

    use crate::catalog::{self, Mirror, Rule};

    const SHOP: &str = "
        CREATE SCHEMA shop;
        CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
        CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL);
        CREATE TABLE shop.orders (
            id uuid PRIMARY KEY, register_id uuid NOT NULL,
            product_id uuid NOT NULL REFERENCES shop.products (id), note text);
        CREATE TABLE shop.lines (
            order_id uuid REFERENCES shop.orders (id), line integer, PRIMARY KEY (order_id, line));
        SELECT sync.declare_replicas('shop.registers', live => 'active');
        SELECT sync.declare_table('shop.products', sync => 'broadcast');
        SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)');
        SELECT sync.declare_table('shop.lines', sync => 'follows(order_id)');
    ";

    const TEA: &str = "00000000-0000-0000-0000-000000000001";

    fn count(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).unwrap().unwrap_or(0)
    }

    fn run(sql: &str) {
        Spi::run(sql).unwrap();
    }

    #[pg_test]
    fn the_relay_reads_every_declaration_parents_first_with_its_rule_and_references() {
        // lines is declared before the tables it points at: it follows
        // them once they are declared.
        run("CREATE SCHEMA shop;
             CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
             CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL);
             CREATE TABLE shop.orders (
                 id uuid PRIMARY KEY, register_id uuid NOT NULL,
                 product_id uuid NOT NULL REFERENCES shop.products (id), note text);
             CREATE TABLE shop.lines (
                 order_id uuid REFERENCES shop.orders (id), line integer, PRIMARY KEY (order_id, line));
             SELECT sync.declare_replicas('shop.registers', live => 'active');
             SELECT sync.declare_table('shop.lines');
             SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)', unmirrored => '{note}');
             SELECT sync.declare_table('shop.products', sync => 'broadcast');
             SELECT sync.declare_table('shop.lines', sync => 'follows(order_id)');");
        let tables = catalog::declared_tables();
        let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["products", "orders", "lines"]);
        let positions: Vec<i32> = tables.iter().map(|t| t.position).collect();
        assert_eq!(positions, [1, 2, 3]);
        let orders = &tables[1];
        assert_eq!(orders.mirror, Mirror::Catalog);
        assert_eq!(
            orders.rule,
            Rule::Assigned {
                column: "register_id".into()
            }
        );
        assert_eq!(
            orders.columns,
            ["id", "register_id", "product_id"],
            "note does not travel"
        );
        assert_eq!(orders.unmirrored, ["note"]);
        assert_eq!(orders.references.len(), 1);
        assert_eq!(orders.references[0].parent, "products");
        assert_eq!(orders.references[0].columns, ["product_id"]);
        let lines = &tables[2];
        assert_eq!(
            lines.rule,
            Rule::Follows {
                columns: vec!["order_id".into()],
                reference: 0
            }
        );
        assert_eq!(lines.key_columns, ["order_id", "line"]);
        assert!(lines.install && lines.indexes);
    }

    #[pg_test]
    fn declaring_the_same_again_keeps_the_digest_and_a_new_column_changes_it() {
        run(SHOP);
        run("SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)')");
        let first = catalog::declarations_digest();
        run("SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)')");
        assert_eq!(catalog::declarations_digest(), first);
        run("ALTER TABLE shop.orders ADD COLUMN quantity integer");
        assert_eq!(
            catalog::declarations_digest(),
            first,
            "the digest is of the declarations, not of the tables"
        );
        run("SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)')");
        assert_ne!(catalog::declarations_digest(), first);
    }

    #[pg_test(
        error = "magic_sync: the relay does not run while the database differs from the declarations:\n- the trigger sync_note_row on shop.lines is disabled\n- no index of shop.orders serves the lookups by (register_id)"
    )]
    fn the_relay_check_refuses_naming_every_problem() {
        run(SHOP);
        run("ALTER TABLE shop.lines DISABLE TRIGGER sync_note_row;
             DROP INDEX shop.orders_register_id_idx");
        crate::declare::drift::refuse_problems(&crate::declare::drift::problems());
    }

    #[pg_test]
    fn the_relay_check_passes_a_database_as_declared() {
        run(SHOP);
        run("ALTER TABLE shop.lines ENABLE ALWAYS TRIGGER sync_note_row");
        crate::declare::drift::refuse_problems(&crate::declare::drift::problems());
        assert_eq!(count("SELECT count(*) FROM sync.check()"), 0);
    }

    #[pg_test]
    fn a_bulk_insert_notes_every_row_once() {
        run(SHOP);
        run("INSERT INTO shop.products SELECT gen_random_uuid(), 'Product ' || i FROM generate_series(1, 5000) AS i");
        assert_eq!(
            count("SELECT count(DISTINCT key) FROM sync.notes WHERE table_name = 'products'"),
            5000
        );
        assert_eq!(count("SELECT count(*) FROM sync.notes"), 5000);
    }

    #[pg_test]
    fn a_notes_table_of_another_shape_is_written_through_sql_with_its_defaults() {
        run(SHOP);
        // A column the trigger does not fill: the insert goes through SQL,
        // which gives it its default.
        run("ALTER TABLE sync.notes ADD COLUMN written_by text NOT NULL DEFAULT current_user");
        run("CREATE INDEX notes_lower ON sync.notes (lower(key))");
        run(&format!(
            "INSERT INTO shop.products VALUES ('{TEA}', 'Tea')"
        ));
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM sync.notes WHERE written_by = current_user AND key = '{TEA}'"
            )),
            1
        );
        run("SET LOCAL enable_seqscan = off");
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM sync.notes WHERE lower(key) = '{TEA}'"
            )),
            1,
            "the expression index is kept"
        );
    }

    #[pg_test]
    fn a_note_written_directly_keeps_every_index_of_the_notes() {
        run(SHOP);
        run("CREATE INDEX notes_by_key_only ON sync.notes (key)");
        run(&format!(
            "INSERT INTO shop.products VALUES ('{TEA}', 'Tea')"
        ));
        run("SET LOCAL enable_seqscan = off");
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM sync.notes WHERE key = '{TEA}'"
            )),
            1
        );
    }

    #[pg_test]
    fn a_writer_without_grants_on_the_engine_s_tables_is_noted() {
        run(SHOP);
        run("CREATE ROLE magic_sync_clerk;
             GRANT USAGE ON SCHEMA shop TO magic_sync_clerk;
             GRANT INSERT ON shop.products TO magic_sync_clerk;
             SET LOCAL ROLE magic_sync_clerk;
             INSERT INTO shop.products VALUES (gen_random_uuid(), 'Tea');
             RESET ROLE");
        assert_eq!(count("SELECT count(*) FROM sync.notes"), 1);
    }

    #[pg_test(
        error = "magic_sync: 2 problems with the declarations:\n- origin: the column note is text, and replica ids are uuid\n- sync => 'assigned(nobody)': shop.orders has no column nobody"
    )]
    fn a_declaration_is_refused_with_every_problem() {
        run(SHOP);
        run("SELECT sync.declare_table('shop.orders', sync => 'assigned(nobody)', origin => 'note')");
    }
}
