"""The detection family (002 §4): download released models, read their softmax heads, check every category."""
