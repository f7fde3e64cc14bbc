"""argmaxable: detect and prevent unargmaxable outputs of bottlenecked softmax and sigmoid classifiers."""

__version__ = "0.1.0"
