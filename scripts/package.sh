#!/usr/bin/env bash
# Builds a Debian package of the extension for the PostgreSQL that
# pg_config names ($PG_CONFIG, or the first on the PATH): a release build
# made by `cargo pgrx package`, wrapped by `dpkg-deb`. Prints the
# package's path: $CARGO_TARGET_DIR (or target/), then package/release/ or
# package/debug/.
#
#   bash scripts/package.sh            # a release build, as shipped
#   bash scripts/package.sh --debug    # a debug build (quicker; not to ship)
#
# The package, postgresql-MAJOR-magic-sync at the workspace's version,
# holds what a server needs to CREATE EXTENSION magic_sync and to ALTER
# EXTENSION magic_sync UPDATE from any earlier release: the library, the
# control file, the install script of the version built, every upgrade
# step of sql/ (magic_sync--A--B.sql), and the released install script each
# step starts from (magic_sync--A.sql). It depends on the PostgreSQL it
# was built for. Installing it writes nothing but those files: no cluster
# is touched, and the library is loaded at the next start (it is
# preloaded) or by the next backend that needs it (docs/src/install.md).
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
case "${1:-}" in
    '') ;;
    --debug) profile=debug ;;
    *)
        echo "usage: package.sh [--debug]" >&2
        exit 2
        ;;
esac

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
fail() {
    echo "package.sh: $*" >&2
    exit 1
}

PG_CONFIG=${PG_CONFIG:-$(command -v pg_config || true)}
[ -x "$PG_CONFIG" ] || fail "no pg_config: set PG_CONFIG to the pg_config of the PostgreSQL to build for"

# PostgreSQL's major version ("PostgreSQL 15.20 (Debian ...)" is 15), and
# where it keeps extensions: the package installs there.
major=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
case "$major" in '' | *[!0-9]*) fail "cannot read PostgreSQL's major version from: $("$PG_CONFIG" --version)" ;; esac
pkglibdir=$("$PG_CONFIG" --pkglibdir)
extdir=$("$PG_CONFIG" --sharedir)/extension

# The extension's version is the workspace's (the control file's
# default_version is @CARGO_VERSION@).
version=$(cargo pkgid -p magic_sync | sed -E 's/.*[#@]//')
case "$version" in [0-9]*.[0-9]*.[0-9]*) ;; *) fail "cannot read the extension's version (cargo pkgid says $version)" ;; esac
# Debian's names take no underscore: postgresql-15-magic-sync, as Debian
# names PostgreSQL's extensions (postgresql-15-pgvector).
name="postgresql-$major-magic-sync"
arch=$(dpkg --print-architecture)

target=${CARGO_TARGET_DIR:-$PWD/target}
out="$target/package/$profile"
root="$out/$name"
deb="$out/${name}_${version}_${arch}.deb"
rm -rf "$root" "$deb"
mkdir -p "$out"

say "building magic_sync $version for PostgreSQL $major ($profile)"
flags=()
[ "$profile" = debug ] && flags+=(--debug)
# stdout is the package's path alone: cargo's output goes to stderr.
cargo pgrx package -p magic_sync --pg-config "$PG_CONFIG" --out-dir "$root" "${flags[@]}" >&2

# Every upgrade step, and the released install script each starts from,
# from sql/ (pgrx copies sql/magic_sync--*.sql itself; this holds the
# package to the list whatever pgrx does).
shopt -s nullglob
steps=(sql/magic_sync--*--*.sql)
starts=()
for step in "${steps[@]}"; do
    from=${step#sql/magic_sync--}
    from=${from%%--*}
    [ -f "sql/magic_sync--$from.sql" ] || fail "$step starts from $from, whose install script sql/magic_sync--$from.sql is missing"
    starts+=("sql/magic_sync--$from.sql")
done
for file in "${steps[@]}" "${starts[@]}"; do
    install -m 644 "$file" "$root$extdir/"
done

# What the package must hold, each file checked.
expected=("$root$pkglibdir/magic_sync.so" "$root$extdir/magic_sync.control" "$root$extdir/magic_sync--$version.sql")
for file in "${steps[@]}" "${starts[@]}"; do
    expected+=("$root$extdir/${file#sql/}")
done
for file in "${expected[@]}"; do
    [ -s "$file" ] || fail "the package lacks ${file#"$root"}"
done
grep -qx "default_version = '$version'" "$root$extdir/magic_sync.control" \
    || fail "the control file's default_version is not $version"

# Depends: the PostgreSQL it was built for, and the C library at least as
# new as the newest symbol version the library uses (it links libc, libm
# and libgcc_s, no more: ldd magic_sync.so).
glibc=$(objdump -T "$root$pkglibdir/magic_sync.so" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
depends="postgresql-$major, libc6 (>= $glibc), libgcc-s1"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)

mkdir -p "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<EOF
Package: $name
Source: magic-sync
Version: $version
Architecture: $arch
Maintainer: ${MAINTAINER:-magic_sync maintainers <maintainers@users.noreply.a-seed-97559ec0.example>}
Installed-Size: $size
Depends: $depends
Section: database
Priority: optional
Description: partial copies of PostgreSQL tables on SQLite devices (PostgreSQL $major)
 magic_sync keeps partial copies of PostgreSQL tables on SQLite devices,
 and brings back what the devices write. This is its server half, the
 PostgreSQL extension magic_sync (CREATE EXTENSION magic_sync) and its
 relay worker, for PostgreSQL $major.
 .
 Preload it (shared_preload_libraries = 'magic_sync') and name the
 databases its worker relays (magic_sync.database); after an upgrade of
 the package, restart PostgreSQL and run ALTER EXTENSION magic_sync UPDATE
 in each database.
EOF
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"

say "wrapping it: dpkg-deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >&2
dpkg-deb --contents "$deb" | awk '{ print "    " $NF }' >&2
echo "$deb"
