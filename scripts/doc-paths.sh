#!/usr/bin/env bash
# Every path the book (docs/src/) and README.md name in backquotes is a file
# or folder of the repository, so a move (issue 31's rooms) cannot leave the
# docs pointing at a room that is gone. A path counts when it holds a slash
# and names a source file (.rs .sql .ts .mjs .sh .proto .toml .vue) or a
# folder (a trailing slash): it is found whole (`pg_magic_sync/src/seal.rs`)
# or as the end of a tracked path (`worker/stalls.rs`, said inside
# pg_magic_sync/src/). Paths of what a build or a test writes, and names
# that are not paths of this repository, are listed below as such.
# Exits non-zero, naming each file and line, when one is not found.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import pathlib, re, subprocess, sys

# Not paths of this repository: written by a build or a test, or another
# project's names.
elsewhere = {
    "magic_sync/",        # a NATS topic's prefix (aweft-link.md)
    "spec/frames/",       # aweft's specification, not this repository
    "head-office-data/",  # the cluster the shop's head office makes where it runs
}
built = ("target/",)      # what builds and tests write
tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
folders = {str(p) + "/" for f in tracked for p in pathlib.PurePosixPath(f).parents if str(p) != "."}
ends = set()
for f in tracked + sorted(folders):
    parts = f.rstrip("/").split("/")
    for i in range(len(parts)):
        ends.add("/".join(parts[i:]) + ("/" if f.endswith("/") else ""))
path = re.compile(r"`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*(?:\.(?:rs|sql|ts|mjs|sh|proto|toml|vue)|/))`")
docs = sorted(pathlib.Path("docs/src").rglob("*.md")) + [pathlib.Path("README.md")]
missing = []
for doc in docs:
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        for name in path.findall(line):
            if "/" not in name.rstrip("/") and not name.endswith("/"):
                continue
            if name in elsewhere or name.startswith(built) or name in ends:
                continue
            missing.append(f"{doc}:{n}: `{name}` is no file or folder of the repository")
if missing:
    print("\n".join(missing))
    print(f"{len(missing)} paths named in the docs are gone: name where the code is now (git ls-files)")
    sys.exit(1)
print(f"every path the docs name is in the repository ({len(docs)} files)")
PY
