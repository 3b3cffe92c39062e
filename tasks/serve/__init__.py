"""Serving: servers (what to run and how to talk to it) and launchers (where and how it runs)."""
