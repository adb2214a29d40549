//! The shop `bench_status` and `bench_redeclare` measure: registers;
//! brands and products for every register; each product's nutrition goes
//! where the product goes; orders are assigned to a register and point at
//! a product. Its rows are made by number, so a run can name them.

/// The shop: registers; brands and products for every register; each
/// product's nutrition goes where the product goes; orders are assigned to
/// a register and point at a product.
pub const SHOP: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT false);
    CREATE TABLE shop.brands (id uuid PRIMARY KEY, name text NOT NULL);
    CREATE TABLE shop.products (
        id uuid PRIMARY KEY, name text NOT NULL, brand_id uuid REFERENCES shop.brands,
        price_cents bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
    CREATE TABLE shop.nutrition (
        product_id uuid PRIMARY KEY REFERENCES shop.products, calories integer NOT NULL);
    CREATE TABLE shop.orders (
        id uuid PRIMARY KEY, register_id uuid NOT NULL,
        product_id uuid NOT NULL REFERENCES shop.products, quantity integer NOT NULL,
        ordered_at timestamptz NOT NULL DEFAULT now());
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.brands', sync => 'broadcast');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
    SELECT sync.declare_table('shop.nutrition', sync => 'follows(product_id)');
    SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)');
";

/// The shop's rows, each statement with its figures: brands (`$1`),
/// products (`$2`, the first half with their nutrition), orders (`$2`
/// products, `$3` for each of `$4` registers), the registers (`$1` of them,
/// not live yet). Ids are made from their numbers, so a run can name them.
pub const BRANDS: &str = "INSERT INTO shop.brands SELECT md5('brand' || i)::uuid, 'Brand ' || i \
     FROM generate_series(1, $1::bigint) AS i";
pub const PRODUCTS: &str = "INSERT INTO shop.products (id, name, brand_id, price_cents) \
     SELECT md5('product' || i)::uuid, 'Product ' || i, md5('brand' || (i % $1::bigint + 1))::uuid, i \
     FROM generate_series(1, $2::bigint) AS i";
pub const NUTRITION: &str = "INSERT INTO shop.nutrition SELECT md5('product' || i)::uuid, i % 900 \
     FROM generate_series(1, $1::bigint / 2) AS i";
pub const ORDERS: &str = "INSERT INTO shop.orders (id, register_id, product_id, quantity) \
     SELECT md5('order' || r || '-' || i)::uuid, md5('register' || r)::uuid, \
            md5('product' || ((r * 7 + i) % $1::bigint + 1))::uuid, 1 + i % 5 \
     FROM generate_series(1, $3::bigint) AS r, generate_series(1, $2::bigint) AS i";
pub const REGISTERS: &str = "INSERT INTO shop.registers (id) SELECT md5('register' || r)::uuid \
     FROM generate_series(1, $1::bigint) AS r";
