"""A small next-token language model trained here on real text (the debtags package descriptions).

Its softmax head (n word tokens x d) is checked like any released model, to show the small-d effect (frequent
tokens crowding out rare ones) with the tokens named, and to measure the range of the head's inputs (ACL 2022
Table 9 / thesis Table A.3) offline. See :mod:`argmaxable.lm.train` and :mod:`argmaxable.lm.report`; the same
model with heads that cannot lose tokens (:mod:`argmaxable.layers`) is :mod:`argmaxable.lm.prevention`.
"""
