# detect family


def detect_targets():
    return []
