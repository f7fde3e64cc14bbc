"""The paper mode rehearsed: experiment=paper's detection over replicas of its 149 models, through the real download
protocols against a local hub (argmaxable.rehearsal.run). `make rehearse-paper` runs it whole; see --help."""

import sys

from argmaxable.rehearsal.run import main

if __name__ == "__main__":
    sys.exit(main())
