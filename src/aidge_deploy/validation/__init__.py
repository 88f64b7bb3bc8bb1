"""Cross-target validation: every output of a model on every target against a reference run."""
