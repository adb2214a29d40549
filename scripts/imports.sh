#!/usr/bin/env bash
# The import graph of both crates, as their own sources say it: for each
# module of the crate root (a folder or a file), the modules it takes names
# from (`use crate::x`, `crate::x::` paths and `use crate::{x, y}`
# groups), in the order lib.rs lists the modules, bottom up; an import from
# a module listed later runs back up, and is printed as such. Names taken
# from the crate root itself (`use crate::Name`) are counted apart. Exits
# non-zero when an import runs back up.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - "$@" <<'PY'
import re, sys, pathlib
status = 0
for crate in ["pg_magic_sync", "replica"]:
    src = pathlib.Path(crate) / "src"
    lib = (src / "lib.rs").read_text()
    order = re.findall(r"^\s*(?:pub )?mod (\w+)\s*[;{]", lib, re.M)
    edges, root = {}, {}
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        if rel.parts[0] in ("bin", "tests") or rel.name == "lib.rs":
            continue
        top = rel.parts[0].removesuffix(".rs")
        text = path.read_text()
        # `crate::x` paths, and each name of a `use crate::{a, b::c}` group.
        targets = re.findall(r"\bcrate::(\w+)", text)
        for group in re.findall(r"\bcrate::\{([^}]*)\}", text):
            targets += re.findall(r"(?:^|,)\s*(\w+)", group)
        for target in targets:
            if target in order and target != top:
                edges.setdefault(top, set()).add(target)
            elif target not in order:
                root.setdefault(top, set()).add(target)
    print(f"{crate}: modules bottom up: {' '.join(order)}")
    for module in order:
        takes = sorted(edges.get(module, ()), key=order.index)
        back = [t for t in takes if order.index(t) > order.index(module)]
        line = f"  {module:<12} <- {', '.join(takes) if takes else '(nothing of the crate)'}"
        if module in root:
            line += f"   [from the crate root: {', '.join(sorted(root[module]))}]"
        print(line)
        for t in back:
            print(f"  BACK UP: {module} imports {t}, which lib.rs lists above it")
            status = 1
sys.exit(status)
PY
