"""Runs Python unittest names from the current folder and closes with the plain line CI reads:
"<label>: N passed, N failed, N skipped". Exit status 0 when tests ran and all passed (with --no-skips: and none was
skipped, for suites that skip only when their environment is missing).

Usage: run_unittests.py LABEL [--no-skips] NAME...   (NAME: a module, module.Class or module.Class.test)
"""

import os
import sys
import unittest


def main(arguments):
    label, names = arguments[0], arguments[1:]
    no_skips = "--no-skips" in names
    names = [name for name in names if name != "--no-skips"]
    sys.path.insert(0, os.getcwd())
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print(f"{label}: {passed} passed, {failed} failed, {skipped} skipped")
    ok = result.wasSuccessful() and result.testsRun > 0 and not (no_skips and skipped)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
