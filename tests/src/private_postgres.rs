//! A copy of the machine's PostgreSQL of a test's own: its programs, its
//! libraries and its share directory, laid out as the machine's are
//! (PostgreSQL finds its directories relative to its programs), the
//! extension as this build installed it included. A test puts another
//! build's library into it (a previous release, a build of the next
//! protocol) and starts clusters from it (`Cluster::start_from`), while
//! the other tests go on with the machine's.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

use crate::cluster::pg_config;

pub struct PrivatePostgres {
    bin: PathBuf,
    pkglib: PathBuf,
    share: PathBuf,
    _dir: TempDir,
}

/// The repository's root, where scripts/ and sql/ are.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

impl PrivatePostgres {
    /// The copy, with the extension this build installed on the machine.
    pub fn copy() -> PrivatePostgres {
        let dir = tempfile::Builder::new()
            .prefix("magic_sync-postgres-")
            .tempdir()
            .expect("a directory for the copy");
        // The cluster's owner (postgres, when the tests run as root) must
        // reach the programs.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let copy = |from: &Path| -> PathBuf {
            let to = dir.path().join(from.strip_prefix("/").unwrap());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            let status = Command::new("cp")
                .arg("-a")
                .arg(from)
                .arg(&to)
                .status()
                .expect("cp");
            assert!(status.success(), "copies {}", from.display());
            to
        };
        let bindir = pg_config("--bindir");
        let home = bindir.parent().expect("bin's parent").to_path_buf();
        let lib = copy(&home);
        let share = copy(&pg_config("--sharedir"));
        let pkglib = lib.join(
            pg_config("--pkglibdir")
                .strip_prefix(&home)
                .expect("the libraries beside the programs"),
        );
        assert!(
            share.join("extension/magic_sync.control").exists(),
            "the magic_sync extension is not installed: run \
             `cargo pgrx install -p magic_sync --pg-config $PG_CONFIG` (scripts/test.sh does)"
        );
        PrivatePostgres {
            bin: lib.join("bin"),
            pkglib,
            share,
            _dir: dir,
        }
    }

    /// Where its programs are, for `Cluster::start_from`.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Puts `library` in place of the extension's library, as a package
    /// upgrade does: a server that loaded the one before keeps it whole,
    /// and loads this one when it starts again.
    pub fn install_library(&self, library: &Path) {
        assert!(
            library.exists(),
            "{} is missing (scripts/test.sh builds it before the tests)",
            library.display()
        );
        install_file(library, &self.pkglib.join("magic_sync.so"));
    }

    /// The library this build installed on the machine, back in place.
    pub fn install_this_builds_library(&self) {
        self.install_library(&pg_config("--pkglibdir").join("magic_sync.so"));
    }

    /// Puts an extension script (`magic_sync--0.1.0.sql`, say) of the
    /// repository's sql/ beside the extension's others.
    pub fn install_script(&self, name: &str) {
        install_file(
            &repository().join("sql").join(name),
            &self.share.join("extension").join(name),
        );
    }
}

/// Copies a file over another through a new name, as a package manager
/// does.
fn install_file(from: &Path, to: &Path) {
    let next = to.with_extension("next");
    std::fs::copy(from, &next)
        .unwrap_or_else(|e| panic!("copies {} to {}: {e}", from.display(), next.display()));
    std::fs::rename(&next, to).expect("puts it in place");
}
