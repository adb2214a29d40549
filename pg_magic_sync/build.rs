//! Makes the engine's fixed statements constants: each `-- name: NAME`
//! section of sql/statements/<path>.sql becomes `pub const NAME: &str` of
//! module `crate::statements::<path>`, holding the section's SQL without its
//! comment lines. The SQL stays in .sql files, where it is read and edited
//! as SQL; the Rust names it, and a misspelt name fails the build.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// A module of statements: its constants and its submodules.
#[derive(Default)]
struct Module {
    statements: Vec<(String, String)>,
    children: BTreeMap<String, Module>,
}

fn main() {
    // Read as the script runs, not as it was compiled: a target directory
    // shared by two checkouts reuses the compiled script for both.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("../sql/statements");
    println!("cargo::rerun-if-changed={}", root.display());
    let mut top = Module::default();
    for file in sql_files(&root) {
        println!("cargo::rerun-if-changed={}", file.display());
        let relative = file.strip_prefix(&root).expect("under the root");
        let mut module = &mut top;
        for part in relative.with_extension("").iter() {
            let part = part.to_str().expect("a UTF-8 file name").to_owned();
            module = module.children.entry(part).or_default();
        }
        let text = std::fs::read_to_string(&file).expect("reads a statements file");
        module.statements.extend(sections(&text, &file));
    }
    let mut out = String::new();
    write_module(&top, &mut out);
    let target = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("statements.rs");
    std::fs::write(target, out).expect("writes the statements");
}

fn sql_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            println!("cargo::rerun-if-changed={}", path.display());
            files.extend(sql_files(&path));
        } else if path.extension().is_some_and(|e| e == "sql") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The file's statements, in order: each `-- name: NAME` line begins one,
/// which runs to the next; comment lines are left out of its SQL.
fn sections(text: &str, file: &Path) -> Vec<(String, String)> {
    let mut found: Vec<(String, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.trim().strip_prefix("-- name:") {
            found.push((name.trim().to_owned(), Vec::new()));
        } else if line.trim_start().starts_with("--") {
            continue;
        } else if let Some((_, sql)) = found.last_mut() {
            sql.push(line);
        }
    }
    found
        .into_iter()
        .map(|(name, lines)| {
            let sql = lines.join("\n").trim().to_owned();
            assert!(
                !sql.is_empty(),
                "{}: the statement {name} is empty",
                file.display()
            );
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
                "{}: {name} is no constant's name",
                file.display()
            );
            (name, sql)
        })
        .collect()
}

fn write_module(module: &Module, out: &mut String) {
    for (name, sql) in &module.statements {
        let _ = writeln!(out, "pub const {name}: &str = {sql:?};");
    }
    for (name, child) in &module.children {
        let _ = writeln!(out, "pub mod {name} {{");
        write_module(child, out);
        let _ = writeln!(out, "}}");
    }
}
