//! The Rust types in `src/generated/` are made from `sync.proto`: this test
//! fails while the two differ. Run it with `MAGIC_SYNC_BLESS=1` to write the
//! types anew after changing the `.proto`.

use std::path::Path;

fn generate_from_the_proto() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let descriptors = protox::compile(["sync.proto"], [root]).expect("sync.proto compiles");
    let out = tempfile::tempdir().expect("a scratch directory");
    prost_build::Config::new()
        .out_dir(out.path())
        .compile_fds(descriptors)
        .expect("prost generates the types");
    std::fs::read_to_string(out.path().join("magic_sync.rs")).expect("the generated file")
}

#[test]
fn the_generated_types_are_those_of_sync_proto() {
    let fresh = generate_from_the_proto();
    let checked_in_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/generated/magic_sync.rs");
    if std::env::var_os("MAGIC_SYNC_BLESS").is_some() {
        std::fs::write(&checked_in_path, &fresh).expect("writes the generated types");
        return;
    }
    let checked_in = std::fs::read_to_string(&checked_in_path).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "src/generated/magic_sync.rs differs from what sync.proto generates; \
         run `MAGIC_SYNC_BLESS=1 cargo test -p magic_sync_proto --test generated_types`"
    );
}
