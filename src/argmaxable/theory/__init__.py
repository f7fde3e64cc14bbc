"""Theory family: closed forms and random matrices that need no download.

Modules: :mod:`regions` (thesis Tables A.1/A.2), :mod:`cover` (Thm 5.1, Fig. 5.2), :mod:`dft` (Thm 5.3,
Figs 5.4/5.5), :mod:`random_layers` (ACL 2022 Fig. 10, Qhull cross-check), :mod:`toy` (ACL 2022 Figs 1/2),
:mod:`basri_jacobs` (Basri & Jacobs Table 1, Fig. 2, appendix B); :mod:`reference` holds the seeds' numbers.
"""
