#!/usr/bin/env python3
"""Every relative link of the project's documents resolves, anchors included.

The documents are README.md, CONTRIBUTING.md and every .md file under docs/. For each Markdown
link `[text](target)` outside code (fenced blocks and inline code spans are skipped) whose target
is not a URL:
  - the path part, relative to the linking file, must name a file or directory of the tree;
  - an anchor (`#name`, alone or after a .md path) must be one the target document defines:
    a heading, with GitHub's rule (the heading's text without its Markdown, lowercased, every
    character dropped that is not a letter, a digit, a space, `-` or `_`, spaces turned into
    `-`; a repeated heading gets `-1`, `-2`, ...), or an explicit `<a name="...">` / `id="..."`.

Prints one line per broken link (file:line: target: why) and exits 1 if there is any.

Usage: links_test.py SOURCE_DIR. Exit 0 pass, 1 fail.
"""
import os
import re
import sys

LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
EXPLICIT_ANCHOR = re.compile(r"<a\s+[^>]*\b(?:name|id)\s*=\s*\"([^\"]+)\"", re.IGNORECASE)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def documents(root):
    found = [os.path.join(root, name) for name in ("README.md", "CONTRIBUTING.md")]
    for directory, _, files in os.walk(os.path.join(root, "docs")):
        found += [os.path.join(directory, f) for f in files if f.endswith(".md")]
    return sorted(p for p in found if os.path.isfile(p))


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = FENCE.match(line)
            if m:
                marker = m.group(1)
                if fence is None:
                    fence = marker
                    continue
                if marker[0] == fence[0] and len(marker) >= len(fence):
                    fence = None
                    continue
            if fence is None:
                yield number, line.rstrip("\n")


def slug(heading):
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        found, seen = set(), {}
        for _, line in prose_lines(path):
            found.update(EXPLICIT_ANCHOR.findall(line))
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        _anchors[path] = found
    return _anchors[path]


def check(root, path):
    errors = []
    for number, line in prose_lines(path):
        line = CODE_SPAN.sub("", line)
        for target in LINK.findall(line):
            if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue  # empty, or a URL (https:, mailto:, ...)
            where, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), where)) if where else path
            if not os.path.exists(resolved):
                errors.append((number, target, "no such file"))
            elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                in_file = os.path.relpath(resolved, root)
                errors.append((number, target, f"no heading or anchor '{anchor}' in {in_file}"))
    return errors


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: links_test.py SOURCE_DIR")
    root = os.path.abspath(sys.argv[1])
    files = documents(root)
    broken = links = 0
    for path in files:
        for number, target, why in check(root, path):
            print(f"{os.path.relpath(path, root)}:{number}: {target}: {why}")
            broken += 1
    for path in files:
        for _, line in prose_lines(path):
            links += len(LINK.findall(CODE_SPAN.sub("", line)))
    print(f"{len(files)} documents, {links} links, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
