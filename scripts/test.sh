#!/usr/bin/env bash
# Set up (venv, ROS wheels, build) if needed, then run every package's tests with
# colcon test. Extra arguments go to pytest, e.g. scripts/test.sh -k store -x.
set -eo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck disable=SC1091
. "$root/scripts/setup.sh"
set -u
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( (RANDOM % 90) + 5 ))}"
export PYTHONUNBUFFERED=1
cd "$root"
# Every ament_python package (a setup.py beside its package.xml) writes its pytest results to
# build/<package>/pytest.xml; each must be there after the run.
packages=()
for setup_py in */setup.py; do
  packages+=("$(basename "$(dirname "$setup_py")")")
done
for pkg in "${packages[@]}"; do rm -f "build/$pkg/pytest.xml"; done
colcon --log-base log test --event-handlers console_direct+ summary- status- \
  --pytest-args -p no:cacheprovider -ra "$@" || true
status=0
for pkg in "${packages[@]}"; do
  if [ ! -s "build/$pkg/pytest.xml" ]; then
    echo "test: pytest wrote no results for $pkg (it crashed or collected nothing)" >&2
    status=1
  fi
done
colcon --log-base log test-result --test-result-base build --verbose || status=$?
# One plain closing line over every package's JUnit results.
python3 - <<'PY'
import glob
import xml.etree.ElementTree as ET
t = f = e = s = 0
for path in glob.glob('build/*/pytest.xml') + glob.glob('build/*/test_results/*/*.xml'):
    for suite in ET.parse(path).getroot().iter('testsuite'):
        t += int(suite.get('tests', 0))
        f += int(suite.get('failures', 0))
        e += int(suite.get('errors', 0))
        s += int(suite.get('skipped', 0))
print(f'tests: {t - f - e - s} passed, {f + e} failed, {s} skipped')
PY
exit "$status"
