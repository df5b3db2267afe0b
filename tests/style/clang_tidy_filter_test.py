#!/usr/bin/env python3
"""clang_tidy.py's filter of the per-file pass (`needs_alone`), without clang-tidy: a file runs a
context check alone exactly when its own text can give that check a diagnostic that its unit could
hide. A filter that let such a file through would leave the check to the unity pass, where a
sibling can hide it (the style.clang_tidy test itself passes either way on a clean tree).

Usage: clang_tidy_filter_test.py    (exit 0 pass, 1 fail)
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clang_tidy  # noqa: E402  (beside this file)

USING, FORWARD, SIGNAL = clang_tidy.CONTEXT_CHECKS
FILES = {
    # A forward declaration in a header: its name makes files that declare or define it candidates.
    "harness/src/a/registry_fwd.h": "namespace bench {\nclass Registry;\n}\n",
    "harness/src/a/plain.cpp": "#include \"registry_fwd.h\"\nnamespace bench { int f() { return 1; } }\n",
    "harness/src/a/using_decl.cpp": "namespace bench {\nusing std::min;\n}\n",
    "harness/src/a/using_typename.cpp": "template <class T> struct D : T {\n  using typename T::type;\n};\n",
    "harness/src/a/directive_alias.cpp": "using namespace std;\nusing Rows = int;\n",
    "harness/src/a/defines_other.cpp": "namespace other {\nclass Registry {};\n}\n",
    "harness/src/a/declares_other.cpp": "namespace other {\nstruct Registry;\n}\n",
    "harness/src/a/handler.cpp": "#include <csignal>\nvoid h(int) {}\nvoid install() { std::signal(SIGINT, h); }\n",
    "harness/src/a/sigaction_only.cpp": "struct sigaction sa;\n",
}
EXPECTED = {
    "harness/src/a/using_decl.cpp": (USING,),
    "harness/src/a/using_typename.cpp": (USING,),
    "harness/src/a/defines_other.cpp": (FORWARD,),
    "harness/src/a/declares_other.cpp": (FORWARD,),
    "harness/src/a/handler.cpp": (SIGNAL,),
    # `struct sigaction sa;` declares nothing the tree forward-declares; bugprone-signal-handler
    # looks at signal() only.
}


def write(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def main():
    fails = []
    with tempfile.TemporaryDirectory() as root:
        write(root, FILES)
        cpps = sorted(f for f in FILES if f.endswith(".cpp"))
        got = clang_tidy.needs_alone(root, cpps, list(clang_tidy.CONTEXT_CHECKS))
        for rel in cpps:
            want = tuple(c for c in clang_tidy.CONTEXT_CHECKS if c in EXPECTED.get(rel, ()))
            if got.get(rel, ()) != want:
                fails.append("%s: runs alone %s, expected %s" % (rel, got.get(rel, ()), want))
        # A call of signal() in a header of the tree: every file runs that check alone.
        write(root, {"harness/src/a/install.h": "inline void install() { signal(2, nullptr); }\n"})
        got = clang_tidy.needs_alone(root, cpps, list(clang_tidy.CONTEXT_CHECKS))
        missing = [rel for rel in cpps if SIGNAL not in got.get(rel, ())]
        if missing:
            fails.append("signal() in a header: %s do not run bugprone-signal-handler alone" % missing)
        # A context check the filter does not know runs alone on every file.
        got = clang_tidy.needs_alone(root, cpps, ["misc-some-new-check"])
        if sorted(got) != cpps:
            fails.append("an unknown context check runs alone on %s only" % sorted(got))
    for line in fails:
        print("FAIL: " + line)
    print("clang_tidy_filter_test: %s" % ("%d failed" % len(fails) if fails else "all passed"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
