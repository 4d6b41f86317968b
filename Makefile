# megatron_ds.cluster: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
export PATH := $(abspath $(BIN)):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# molecule/chaos is `make chaos`'s (16 minutes on a quiet 2-core machine, more when it is shared), not part of `make test`.
SCENARIOS ?= $(filter-out chaos,$(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))))
SIM_NODES ?= 3
# make demo DEMO_SCHEDULER=slurm: Slurm on the simulated nodes, the jobs submitted through it.
DEMO_SCHEDULER ?= none

.PHONY: help setup venv docker image demo sim-up sim-down test lint sanity units molecule chaos-fabric \
	molecule-% chaos chaos-smoke bench changelog clean vm-image vm-test vm-down

help:
	@echo "make demo   - set everything up, start $(SIM_NODES) simulated nodes, run site.yml and the burn-in on them, summarise"
	@echo "make test   - every check: yamllint, ansible-lint, sanity, unit tests, molecule scenarios"
	@echo "make setup  - Python venv, Docker engine and the offline node image only"
	@echo "make chaos  - the supervisor's chaos tests: local CPU ranks (rank kill, hang, node loss, damaged tag, NaN), then the real pretrain_gpt.py with MEGATRON_DS_SRC (node loss, lost optimizer state), then Docker nodes (NaN, rank kill, hang, damaged tag, full disk at a save, two kills in one save interval, node loss, the supervisor killed mid-recovery)"
	@echo "make chaos-smoke - one fault of make chaos (a rank killed, retried), as .ci/run runs it; about 30 s"
	@echo "make vm-test - the driver (DKMS, nouveau, reboot), soft-RoCE, PAM memlock and time sync on 2 Debian 12 VMs (qemu TCG; not in make test)"

$(VENV)/.installed: requirements.txt requirements-test.txt
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	DS_BUILD_OPS=0 $(BIN)/pip install -q -r requirements-test.txt
	touch $@

venv: $(VENV)/.installed

docker:
	scripts/ensure-docker.sh

image: docker
	scripts/build-node-image.sh

setup: venv image

# Megatron-DeepSpeed is optional on the simulated cluster: MEGATRON_DS_SRC=<a checkout> or
# MEGATRON_DS_ARCHIVE=<a .tar.gz of it> makes the nodes install it from .cache/ (sha256-checked,
# offline); with neither, the checkout is skipped and the demo runs the burn-in alone.
sim-up: setup
	$(PY) tests/wheelhouse/fill.py --profile "$$($(PY) scripts/demo.py profile)" --python 3.11
	$(PY) scripts/demo.py source
	$(PY) scripts/sim-cluster up --nodes $(SIM_NODES)

sim-down: venv
	$(PY) scripts/sim-cluster down

# site.yml, the burn-in, and with a Megatron-DeepSpeed source a few iterations of pretrain_gpt.py;
# then a summary. Logs in logs/demo/<time>/. The nodes stay up: `make sim-down` removes them.
demo: sim-up
	$(PY) scripts/demo.py run --inventory inventories/sim --scheduler $(DEMO_SCHEDULER)

lint: venv
	$(BIN)/yamllint -s .
	$(BIN)/ansible-lint --profile production

sanity: venv
	scripts/ansible-test.sh sanity

# pytest runs every unit and integration test; ansible-test then runs the module_utils and module
# tests again in its own context, where only ansible.module_utils is importable (what the nodes
# have). Its controller context would run the rest a second time, as pytest just did.
units: venv
	$(BIN)/pytest -q -n 2 tests/unit tests/integration
	scripts/ansible-test.sh units tests/unit/plugins/module_utils/ tests/unit/plugins/modules/

molecule: setup
	scripts/molecule-all.sh $(SCENARIOS)

molecule-%: setup
	$(BIN)/molecule test -s $*

test: lint sanity units molecule
	@echo "make test: all checks passed"

# .ci/run's cheap subset of make chaos: one rank SIGKILLed on the local process cluster and
# retried by the supervisor from the newest tag (about 30 s).
CHAOS_SMOKE = test_rank_kill_is_retried_from_the_newest_tag
chaos-smoke: venv
	$(BIN)/pytest -q -s -p no:cacheprovider tests/chaos/test_chaos_local.py::$(CHAOS_SMOKE)

# Not part of `make test` (docs/benchmarks.md has the times): the local process cluster (rank
# kill, hang, node loss with a damaged tag, NaN; 3-5 min); with MEGATRON_DS_SRC (a checkout) and
# MEGATRON_DS_PYTHON (a python with torch, DeepSpeed, transformers, nltk and pybind11) the real
# pretrain_gpt.py through a node loss and a lost optimizer state (about 6 min; skipped without
# them); then molecule/chaos on Docker nodes
# (the supervisor as deployed by supervise.yml: NaN, rank kill, hang, damaged tag, a save into a
# full disk, two kills within one save interval, a node container stopped for good).
chaos: setup
	CHAOS_REPORT=$(CURDIR)/chaos-report.json $(BIN)/pytest -q -s -p no:cacheprovider tests/chaos \
	  --deselect tests/chaos/test_chaos_local.py::$(CHAOS_SMOKE)
	CHAOS_REPORT=$(CURDIR)/chaos-report-docker.json MOLECULE_RETRIES=0 scripts/molecule-all.sh chaos

# Not part of `make test` or `make chaos` (it needs root, iproute2's tc and the kernel's sch_tbf):
# the fabric gate on a cluster of network namespaces, every link shaped to 1 Gbit/s, ten healthy
# bisections, then node3's link at half the rate, which must be named within the round bound
# (about 6 min; docs/benchmarks.md).
chaos-fabric: venv
	$(BIN)/python tests/chaos/fabric_netns.py --nodes 4 --rate-mbit 1000 --slow node3 --slow-factor 0.5 \
	  --healthy-runs 10 --fraction 0.7 --report $(CURDIR)/chaos-report-fabric.json

# Not part of `make test`: what a container cannot test (a DKMS build for the node's kernel, the
# nouveau blacklist, the initramfs and a reboot, RDMA devices, PAM limits in an ssh session, time
# sync), on two Debian 12 VMs under qemu TCG (scripts/sim-vm; root needed for the image's chroot).
# The image and its DKMS layer are cached in .cache/simvm; times in docs/benchmarks.md.
vm-image: setup
	scripts/sim-vm image

vm-test: setup
	tests/simvm/run.sh

vm-down:
	scripts/sim-vm down

bench: setup
	$(PY) bench/site_rerun.py

changelog: venv
	$(BIN)/antsibull-changelog lint

clean: sim-down
	rm -rf .cache tests/output
