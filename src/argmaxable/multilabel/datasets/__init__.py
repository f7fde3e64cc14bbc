"""multilabel/datasets."""
