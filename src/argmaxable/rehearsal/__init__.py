"""The paper mode rehearsed: replicas of the papers' released models (:mod:`.replicas`), made on request in their
real formats (:mod:`.blobs`), served by a local hub speaking the real download protocols (:mod:`.server`), run
through the detection family to the report (:mod:`.run`, ``scripts/rehearse_paper.py``)."""
