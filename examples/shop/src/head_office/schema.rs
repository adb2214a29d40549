//! The head office's tables, and what travels: the products down to every
//! live register, the receipts up from the register that wrote them.

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
    CREATE TABLE shop.receipts (
        id          uuid PRIMARY KEY,
        register_id uuid NOT NULL REFERENCES shop.registers,
        product     text NOT NULL,
        total_cents bigint NOT NULL,
        sold_at     timestamptz NOT NULL);
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
    SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');
";

/// The gateway's role on the head office's own cluster.
pub const GATEWAY_ROLE: &str = "
    CREATE ROLE gateway LOGIN;
    SELECT sync.allow_gateway('gateway');
    GRANT USAGE ON SCHEMA shop TO gateway;
    GRANT SELECT, INSERT, UPDATE ON shop.receipts TO gateway;
    GRANT CREATE ON DATABASE shop TO gateway;
";

/// The first products, so that the registers have something to sell.
pub const FIRST_PRODUCTS: &str = "
    INSERT INTO shop.products (id, name, price_cents) VALUES
        (gen_random_uuid(), 'Tea', 250),
        (gen_random_uuid(), 'Coffee', 300),
        (gen_random_uuid(), 'Cake', 450);
";
