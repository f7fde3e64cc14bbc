# multilabel family


def multilabel_targets():
    return []
