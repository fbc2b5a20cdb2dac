"""Tests of ``autograd_helpers.checks``, named after the package they test (see CONTRIBUTING)."""
