"""The test suite, a package so its helpers import by name from it (`from tests.support import ...`)."""
