# simforge_ros: two commands on a fresh machine — `make demo` and `make test`.
# Everything installed here is pinned in requirements.txt; build outputs stay out of git.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
DEPS   := $(VENV)/.deps-stamp
INST   := $(VENV)/.install-stamp
SOURCES := $(shell find simforge_ros msg srv config launch examples -type f \
             -not -path '*/__pycache__/*' -not -path 'simforge_ros/msg/*' \
             -not -path 'simforge_ros/srv/*' 2>/dev/null) setup.py CMakeLists.txt package.xml
# the package's folders too: a module removed or renamed changes only its folder's mtime
SOURCES += $(shell find simforge_ros -type d -not -name __pycache__ -not -path 'simforge_ros/msg*' \
             -not -path 'simforge_ros/srv*' 2>/dev/null)

.PHONY: setup demo test bench lint clean

setup: $(INST)

$(DEPS): requirements.txt tools/fix_wheel_cmake.py tools/build_tf2_msgs.py $(wildcard third_party/tf2_msgs/*.* third_party/tf2_msgs/msg/*)
	@test -x $(PY) || $(PYTHON) -c 'import sys; v = sys.version.split()[0]; sys.exit(0 if sys.version_info[:2] == (3, 11) else f"make setup: the ROS 2 Kilted wheels on PyPI are built for CPython 3.11; $(PYTHON) is {v} (make setup PYTHON=python3.11)")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) tools/fix_wheel_cmake.py
	$(PY) tools/build_tf2_msgs.py  # tf2_msgs/TFMessage: no wheel on PyPI
	touch $@

$(INST): $(DEPS) $(SOURCES)
	rm -rf build/lib.* build/bdist.*  # setuptools keeps a removed module's old copy there and installs it
	$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall .
	touch $@

demo: setup
	$(VENV)/bin/simforge run right_turn --repeat 11

test: setup
	$(VENV)/bin/pytest test

bench: setup
	$(VENV)/bin/simforge bench

lint: setup
	$(VENV)/bin/ruff check simforge_ros test examples tools launch setup.py
	$(VENV)/bin/mypy simforge_ros

clean:
	rm -rf build dist *.egg-info $(VENV)
