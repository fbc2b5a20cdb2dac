"""Course tooling for maintainers and `make` targets; not for learners to import."""
