#!/usr/bin/env python3
"""Holds the line on two kinds of growth in production code (tests excluded).

1. `Result<_, String>`: errors should be typed. The count may not rise above its ceiling.
2. Repeated code: runs of WINDOW consecutive substantial lines (whitespace-normalised,
   braces, blank lines, comments and `use` lines left out) that appear in more than one
   place. The number of such repeated places may not rise above its ceiling.
3. Long functions: a `fn` whose body spans more than LONG_FUNCTION_LINES lines. Their
   number may not rise above its ceiling.

Run from the repository root. `--print` lists what is counted. When a clean-up brings a
figure down, lower its ceiling here in the same change so it cannot creep back.
"""
import os
import re
import sys
from collections import defaultdict

RESULT_STRING_CEILING = 97
REPEATED_PLACES_CEILING = 19
WINDOW = 6
LONG_FUNCTION_LINES = 120
LONG_FUNCTIONS_CEILING = 0

FN_START = re.compile(r"^(\s*)(pub(\([a-z]+\))? )?(const )?(async )?(unsafe )?fn (\w+)")
RESULT_STRING = re.compile(r"Result<[^;{]*,\s*String>")
TRIVIAL = re.compile(r"^(\}|\{|\)|\];?|\);?|\},?|\)\)?;?|\}\)?;?|else \{|\} else \{|Ok\(\(\)\)|None|_ => \{\}|)$")


def production_files(root="crates"):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("tests", "benches", "target", "fuzz")]
        for name in filenames:
            if name.endswith(".rs") and name not in ("tests.rs", "testutil.rs"):
                yield os.path.join(dirpath, name)


def production_lines(path):
    """The file's lines up to its first `#[cfg(test)]` (where inline tests start)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if line.strip().startswith("#[cfg(test)]"):
                return
            yield number, line


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


def main():
    show = "--print" in sys.argv
    result_string = []
    windows = defaultdict(list)
    long = []
    for path in sorted(production_files()):
        long += [f"{path}:{n}: fn {name}: {length} lines" for n, name, length in long_functions(path)]
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
    if show:
        print("\n".join(result_string))
        print("\n".join(long))
        for group in repeated:
            print("repeated: " + ", ".join(f"{p}:{n}" for p, n in group))
    failed = False
    for what, count, ceiling in (
        ("Result<_, String> in production code", len(result_string), RESULT_STRING_CEILING),
        ("places repeating another's code", len(places), REPEATED_PLACES_CEILING),
        (f"functions over {LONG_FUNCTION_LINES} lines", len(long), LONG_FUNCTIONS_CEILING),
    ):
        print(f"{what}: {count} (ceiling {ceiling})")
        if count > ceiling:
            print(f"  over the ceiling: see scripts/check-growth.py --print", file=sys.stderr)
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
