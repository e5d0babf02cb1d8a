#!/usr/bin/env python3
"""Holds the line on two kinds of growth in production code (tests excluded).

1. `Result<_, String>`: errors should be typed. The count may not rise above its ceiling,
   and none may stand in the public API (a `pub fn`'s signature, a method of a `pub trait`,
   a `pub` field or type): that ceiling is zero.
2. Repeated code: runs of WINDOW consecutive substantial lines (whitespace-normalised,
   braces, blank lines, comments and `use` lines left out) that appear in more than one
   place. The number of such repeated places may not rise above its ceiling.
3. Long functions: a `fn` whose body spans more than LONG_FUNCTION_LINES lines. Their
   number may not rise above its ceiling.
4. Module circles: modules of one crate that reach back to themselves through `crate::`
   and `super::` paths in code (comments left out; a module's own ancestors and
   descendants do not count). Their number may not rise above its ceiling.

Run from the repository root. `--print` lists what is counted. When a clean-up brings a
figure down, lower its ceiling here in the same change so it cannot creep back.
"""
import os
import re
import sys
from collections import defaultdict

RESULT_STRING_CEILING = 63
PUBLIC_RESULT_STRING_CEILING = 0
REPEATED_PLACES_CEILING = 9
WINDOW = 6
LONG_FUNCTION_LINES = 120
LONG_FUNCTIONS_CEILING = 0
MODULE_CIRCLES_CEILING = 0

FN_START = re.compile(r"^(\s*)(pub(\([a-z]+\))? )?(const )?(async )?(unsafe )?fn (\w+)")
RESULT_STRING = re.compile(r"Result<[^;{]*,\s*String>")
ITEM = re.compile(r"^(\s*)(pub(\([^)]*\))? )?((const|async|unsafe|extern \"C\") )*fn \w+")
PUB_FIELD_OR_TYPE = re.compile(r"^\s*pub (type )?\w+\s*[:=]")
PUB_TRAIT = re.compile(r"^(\s*)pub trait \w+")
TRIVIAL = re.compile(r"^(\}|\{|\)|\];?|\);?|\},?|\)\)?;?|\}\)?;?|else \{|\} else \{|Ok\(\(\)\)|None|_ => \{\}|)$")


TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))? )?mod (\w+);")


def production_files(root="crates"):
    """Source files outside tests, benches and test modules (`tests.rs`, `testutil.rs`,
    and any file a `#[cfg(test)] mod name;` declares)."""
    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("tests", "benches", "target", "fuzz")]
        paths += [os.path.join(dirpath, n) for n in filenames if n.endswith(".rs")]
    test_only = set()
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            declared = TEST_MODULE.findall(f.read())
        stem, name = os.path.splitext(path)[0], os.path.basename(path)
        here = os.path.dirname(path) if name in ("lib.rs", "main.rs", "mod.rs") else stem
        for module in declared:
            test_only |= {os.path.join(here, module + ".rs"), os.path.join(here, module, "mod.rs")}
    for path in paths:
        if os.path.basename(path) not in ("tests.rs", "testutil.rs") and path not in test_only:
            yield path


def production_lines(path):
    """The file's lines up to its first `#[cfg(test)]` (where inline tests start)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if line.strip().startswith("#[cfg(test)]"):
                return
            yield number, line


def public_result_strings(path):
    """(line, text) of each `Result<_, String>` in the file's public API: in the
    signature of a `pub fn` or of a method declared in a `pub trait`, or in a `pub`
    field or type."""
    lines = list(production_lines(path))
    found = []
    trait_close = None
    for i, (number, line) in enumerate(lines):
        if trait_close is None and (t := PUB_TRAIT.match(line)):
            trait_close = t.group(1) + "}"
        elif trait_close is not None and line.rstrip() == trait_close:
            trait_close = None
        if not RESULT_STRING.search(line):
            continue
        if PUB_FIELD_OR_TYPE.match(line):
            found.append((number, line.strip()))
            continue
        # The function whose signature holds the line: no body opened before it.
        for j in range(i, -1, -1):
            before = lines[j][1]
            if j < i and before.rstrip().endswith("{"):
                break
            item = ITEM.match(before)
            if item:
                if item.group(2) == "pub " or (trait_close is not None and item.group(2) is None):
                    found.append((number, line.strip()))
                break
    return found


SELF_TEST = """\
pub fn parse(text: &str) -> Result<Token, String> {
    let local: Result<(), String> = Ok(());
}
fn private(x: u32) -> Result<(), String> {
pub(crate) fn inside(x: u32) -> Result<(), String> {
pub fn start(
    dir: &Path,
) -> Result<Server, String> {
pub trait Source {
    fn read(&mut self) -> Result<u64, String>;
}
impl Source for File {
    fn read(&mut self) -> Result<u64, String> {
}
pub struct Plan {
    pub cost: Result<u64, String>,
    hidden: Result<u64, String>,
}
#[cfg(test)]
pub fn in_tests() -> Result<(), String> {
"""


def self_test():
    """The public-API rule on a known text: lines 1, 8, 10 and 16 are public."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".rs", delete=False) as f:
        f.write(SELF_TEST)
    try:
        found = [n for n, _ in public_result_strings(f.name)]
    finally:
        os.unlink(f.name)
    if found != [1, 8, 10, 16]:
        sys.exit(f"check-growth: its public-API rule is broken: lines {found}, expected [1, 8, 10, 16]")


def substantial(line):
    text = " ".join(line.split())
    if TRIVIAL.match(text) or text.startswith(("//", "use ", "pub use ", "#[")):
        return None
    return text


def long_functions(path):
    """(line, name, length) of each function in the file's production part longer than
    LONG_FUNCTION_LINES: from its `fn` line to the first `}` at the same indent."""
    lines = list(production_lines(path))
    found = []
    for i, (number, line) in enumerate(lines):
        start = FN_START.match(line)
        if not start or line.rstrip().endswith(";"):
            continue
        close = start.group(1) + "}"
        for end_number, end_line in lines[i + 1 :]:
            if end_line.rstrip() == close:
                if end_number - number + 1 > LONG_FUNCTION_LINES:
                    found.append((number, start.group(7), end_number - number + 1))
                break
    return found


PATH_START = re.compile(r"\b(crate|super(?:::super)*)::")
IDENT = re.compile(r"\s*(\w+)\s*")


def named_paths(text, i, prefix, out):
    """Reads the path at text[i:] that follows `prefix` (`a::b`, `a::{b, c::d}`) and
    appends every full path it names to `out`; returns where it stopped."""
    while text.startswith("{", i):
        i += 1
        while (m := IDENT.match(text, i)) is not None:
            i = named_paths(text, m.end(), prefix + [m.group(1)], out)
            i = len(text) - len(text[i:].lstrip())
            if not text.startswith(",", i):
                break
            i = len(text) - len(text[i + 1 :].lstrip())
        close = text.find("}", i)
        return len(text) if close < 0 else close + 1
    m = IDENT.match(text, i)
    if m is None:
        out.append(prefix)
        return i
    if text.startswith("::", m.end()):
        return named_paths(text, m.end() + 2, prefix + [m.group(1)], out)
    out.append(prefix + [m.group(1)])
    return m.end()


def module_edges(src):
    """The crate's modules under `src` and, for each, the others its code names
    (a module's own ancestors and descendants left out)."""
    modules = {}
    for path in production_files(src):
        parts = os.path.relpath(path, src)[:-3].split(os.sep)
        modules[tuple(parts[:-1] if parts[-1] in ("lib", "main", "mod") else parts)] = path
    edges = {m: set() for m in modules}
    for module, path in modules.items():
        text = re.sub(r"//[^\n]*", "", "".join(line for _, line in production_lines(path)))
        for start in PATH_START.finditer(text):
            ups = start.group(1).count("super")
            named = []
            base = [] if ups == 0 else list(module[: len(module) - ups])
            named_paths(text, start.end(), base, named)
            for full in named:
                found = (tuple(full[:k]) for k in range(len(full), 0, -1))
                target = next((t for t in found if t in modules), None)
                if target and target[: len(module)] != module and module[: len(target)] != target:
                    edges[module].add(target)
    return edges


def module_circles(root="crates"):
    """Each circle of modules inside one crate: `crate: a, b, c`."""
    circles = []
    for crate in sorted(os.listdir(root)):
        src = os.path.join(root, crate, "src")
        if os.path.isdir(src):
            for c in strongly_connected(module_edges(src)):
                if len(c) > 1:
                    circles.append(f"{crate}: " + ", ".join(sorted("::".join(m) for m in c)))
    return circles


def strongly_connected(edges):
    """Tarjan's strongly connected components of `edges` (node -> set of nodes)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            found.append(component)

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def main():
    show = "--print" in sys.argv
    self_test()
    result_string = []
    public_result_string = []
    windows = defaultdict(list)
    long = []
    for path in sorted(production_files()):
        long += [f"{path}:{n}: fn {name}: {length} lines" for n, name, length in long_functions(path)]
        public_result_string += [f"{path}:{n}: {t}" for n, t in public_result_strings(path)]
        kept = []
        for number, line in production_lines(path):
            if RESULT_STRING.search(line):
                result_string.append(f"{path}:{number}: {line.strip()}")
            text = substantial(line)
            if text is not None:
                kept.append((number, text))
        for i in range(len(kept) - WINDOW + 1):
            key = "\n".join(text for _, text in kept[i : i + WINDOW])
            windows[key].append((path, kept[i][0]))
    repeated = sorted(
        (places for places in windows.values() if len(places) > 1), key=lambda p: p[0]
    )
    # Overlapping windows of one long repeated run count once per place.
    places = set()
    for group in repeated:
        for path, line in group:
            if not any((path, line - k) in places for k in range(1, WINDOW)):
                places.add((path, line))
    circles = module_circles()
    if show:
        print("\n".join(result_string))
        print("\n".join("public: " + r for r in public_result_string))
        print("\n".join("circle: " + c for c in circles))
        print("\n".join(long))
        for group in repeated:
            print("repeated: " + ", ".join(f"{p}:{n}" for p, n in group))
    failed = False
    for what, count, ceiling in (
        ("Result<_, String> in production code", len(result_string), RESULT_STRING_CEILING),
        ("of them in the public API", len(public_result_string), PUBLIC_RESULT_STRING_CEILING),
        ("places repeating another's code", len(places), REPEATED_PLACES_CEILING),
        (f"functions over {LONG_FUNCTION_LINES} lines", len(long), LONG_FUNCTIONS_CEILING),
        ("module circles inside a crate", len(circles), MODULE_CIRCLES_CEILING),
    ):
        print(f"{what}: {count} (ceiling {ceiling})")
        if count > ceiling:
            print(f"  over the ceiling: see scripts/check-growth.py --print", file=sys.stderr)
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
