"""multilabel."""
