# Two entry points, each self-contained on a fresh machine with Python 3.11:
#   make run   - create .venv, install with the pipeline extra, run the offline default pipeline (snakemake)
#   make test  - create .venv, install with the pipeline and dev extras, lint (make lint) and run the test suite
# (`pip install .` alone is the tool without the pipeline: argmaxable check / audit / verify and the Python API.)
#   make lint  - ruff, lint-imports (the package's layer order) and snakemake --lint; any finding fails it
#   make fuzz  - the property tests with new random examples (make test repeats the same ones)
PYTHON ?= python3
VENV ?= .venv
CORES ?= 2
BIN := $(VENV)/bin

.PHONY: run test fuzz test-slurm bench lint clean browser rehearse-paper catalogues audit-llms

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(BIN)/pip install -q -e '.[pipeline,dev]'
	touch $@

run: $(VENV)/.installed
	$(BIN)/snakemake --cores $(CORES)

test: $(VENV)/.installed lint
	$(if $(wildcard ../shared/seeds),ARGMAXABLE_SEEDS=$(abspath ../shared/seeds)) $(BIN)/pytest

# The property tests with new random examples (make test draws the same ones every run); a failure found here
# becomes an @example of its test.
fuzz: $(VENV)/.installed
	HYPOTHESIS_PROFILE=explore $(BIN)/pytest -q $$(grep -l '@given' tests/*.py)

# Debian's chromium for tests/test_report.py (renders results/report.html headless) and a CJK font
# (fonts-noto-cjk: the report embeds the subset its OCR tokens need, argmaxable.glyphs); needs root and apt.
browser:
	command -v chromium >/dev/null && [ -d /usr/share/fonts/opentype/noto ] || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk)

# A real single-node SLURM cluster on this machine (Debian, root): the SLURM profile's run equals a local run.
test-slurm: $(VENV)/.installed
	VENV=$(VENV) scripts/test_slurm.sh

bench: $(VENV)/.installed
	$(BIN)/python -m benchmarks $(if $(AGAINST),--against $(AGAINST))

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/snakemake --lint --cores 1

clean:
	rm -rf results .snakemake

# config/model/<key>.yaml of every row of config/catalogues/ (the WMT17, OPUS-MT and Bergamot tables), after a row
# is added or edited; tests/test_config.py fails while a file and its row differ.
# The token audits of Gemma-3-270M and Qwen2.5-Coder-0.5B with the model itself (tokenizer round trip, prompting
# test; config/experiment/audit_llms.yaml): opt-in, hours on 2 cores; cards under results/audit_llms/detect/audit/.
audit-llms: $(VENV)/.installed
	$(BIN)/snakemake --cores $(CORES) --config 'overrides=[experiment=audit_llms]' -- \
		results/audit_llms/detect/tables/audit_cards.md

catalogues: $(VENV)/.installed
	$(BIN)/argmaxable config catalogues

# The paper mode rehearsed (scripts/rehearse_paper.py): the 149 models' replicas at their true shapes, served by a
# local hub, through the detection family to the report; about 40 minutes on 2 cores (benchmarks/RESULTS.md).
rehearse-paper: $(VENV)/.installed
	$(BIN)/python scripts/rehearse_paper.py --work rehearsal $(REHEARSE)
