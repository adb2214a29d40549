//! The head office's tables, and what travels: the products down to every
//! live register; the receipts and their lines up from the register that
//! wrote them; each register's footer up, and the head office's wishes of
//! it down.

/// Made once, on a database with the extension preloaded: the tables,
/// their declarations, and the gateway's role (which may take, acknowledge
/// and file, and write receipts: nothing else of the engine's).
pub const MIGRATION: &str = "
    CREATE EXTENSION IF NOT EXISTS magic_sync;
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (
        id     uuid PRIMARY KEY,
        name   text NOT NULL,
        active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.products (
        id          uuid PRIMARY KEY,
        name        text NOT NULL,
        price_cents bigint NOT NULL,
        updated_at  timestamptz NOT NULL DEFAULT now());
    -- A sale is a receipt with its lines, each line pointing at the product
    -- it sold. The book's receipt is one product (product_id, quantity,
    -- total); the shop's till sells several at once, so a receipt here is
    -- its total and when, and its lines each carry the product, the
    -- quantity and the price it was sold at. Both are records a register
    -- writes and the head office files, keyed by their register (origin).
    -- No foreign keys among them or to the products: they are filed part
    -- by part as registers send them, and a product deleted here stays
    -- behind the receipts that sold it on the register (retired there).
    CREATE TABLE shop.receipts (
        id          uuid PRIMARY KEY,
        register_id uuid NOT NULL REFERENCES shop.registers,
        total_cents bigint NOT NULL,
        sold_at     timestamptz NOT NULL);
    CREATE TABLE shop.receipt_lines (
        id          uuid PRIMARY KEY,
        receipt_id  uuid NOT NULL,
        register_id uuid NOT NULL REFERENCES shop.registers,
        product_id  uuid NOT NULL,
        quantity    integer NOT NULL,
        price_cents bigint NOT NULL);
    -- Each register's footer as it last reported it: a setting, the
    -- register's own, which the head office may wish another (sync.desire).
    CREATE TABLE shop.footers (
        register_id uuid PRIMARY KEY REFERENCES shop.registers,
        text        text NOT NULL,
        changed_at  timestamptz NOT NULL);
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
    SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');
    SELECT sync.declare_table('shop.receipt_lines', mirror => 'record', origin => 'register_id');
    SELECT sync.declare_table('shop.footers', mirror => 'setting', origin => 'register_id',
                              version => 'changed_at', desired => '{text}',
                              apply => 'if_unchanged');
";

/// A table the shop's tables of this build have and an earlier build's did
/// not: a head office made by an earlier build is refused, saying so.
pub const LATEST_TABLE: &str = "shop.footers";

/// The gateway's role on the head office's own cluster.
pub const GATEWAY_ROLE: &str = "
    CREATE ROLE gateway LOGIN;
    SELECT sync.allow_gateway('gateway');
    GRANT USAGE ON SCHEMA shop TO gateway;
    GRANT SELECT, INSERT, UPDATE ON shop.receipts, shop.receipt_lines TO gateway;
    GRANT SELECT, INSERT, UPDATE, DELETE ON shop.footers TO gateway;
    GRANT CREATE ON DATABASE shop TO gateway;
";

/// The first products, so that the registers have something to sell.
pub const FIRST_PRODUCTS: &str = "
    INSERT INTO shop.products (id, name, price_cents) VALUES
        (gen_random_uuid(), 'Tea', 250),
        (gen_random_uuid(), 'Coffee', 300),
        (gen_random_uuid(), 'Cake', 450);
";
