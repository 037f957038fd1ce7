"""Experiment records: every submission becomes a wiki page plus a notebook, kept current by a watcher."""
