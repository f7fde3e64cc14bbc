# theory family


def theory_targets():
    return []
