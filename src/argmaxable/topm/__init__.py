"""Top-m experiments (Basri & Jacobs Figs 1, 3, 4, 6, 7) and the top-k ranking guarantee (thesis
Prop. 5.3): prescribed probabilities and rankings as derived layers of the one core (:mod:`.layers`)."""
