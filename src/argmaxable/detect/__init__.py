"""The detection family (ACL 2022 §4): download released models, read their softmax heads, check every category."""
