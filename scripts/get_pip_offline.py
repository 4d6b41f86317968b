"""Stand-in for pypa's get-pip.py, for ansible-test's venv bootstrap.

ansible-test downloads get-pip.py from a host that sites like ours cannot reach; PyPI itself
is reachable. This does what get-pip does (install pip, then `pip install <args>`), seeding
pip from the stdlib's ensurepip instead of an embedded zip. ansible-test runs it as __main__
with get-pip's command line: pip install options, packages, --no-setuptools/--no-wheel.
"""
import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}

subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"])
args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)
