#!/usr/bin/env bash
# Prepare this workspace: use a sourced ROS 2, or build one from PyPI wheels in
# a git-ignored .venv; then colcon build every package. Idempotent: a second run
# with nothing changed only re-checks stamps and lets colcon skip what is built.
#
# Source it (". scripts/setup.sh") to get the environment in your shell, or let
# scripts/demo.sh and scripts/test.sh source it for you.

_mm_setup() {
  local root venv req stamp want have pyinc npinc
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  venv="${MUSCLE_MEM_VENV:-$root/.venv}"
  req="$root/requirements/kilted-py311.txt"

  if [ -n "${ROS_DISTRO:-}" ] && python3 -c "import rclpy" 2>/dev/null; then
    echo "setup: using the sourced ROS 2 ${ROS_DISTRO}"
    # module:how to install it. rosdep installs those with a key (package.xml); mcap and
    # mcap_ros2 come with the mcap-ros2-support key (a pip rule), gymnasium_robotics (the
    # demo's arm models) with python3-gymnasium-robotics-pip (a pip rule too; only its model
    # files are read, so it is looked for, not imported: its __init__ imports gymnasium).
    # psycopg (only for a postgresql:// store) and behaviortreepy (one test) have no key:
    # see docs/setup.md.
    local entry mod how check
    for entry in numpy:python3-numpy scipy:python3-scipy yaml:python3-yaml PIL:python3-pil \
        mujoco:mujoco matplotlib:python3-matplotlib pytest:python3-pytest \
        pytest_timeout:python3-pytest-timeout rich:python3-rich mcap:mcap-ros2-support \
        mcap_ros2:mcap-ros2-support py_trees:ros-${ROS_DISTRO}-py-trees pydot:python3-pydot \
        gymnasium_robotics:python3-gymnasium-robotics-pip; do
      mod="${entry%%:*}"
      how="${entry#*:}"
      check="import $mod"
      if [ "$mod" = gymnasium_robotics ]; then
        check="import importlib.util, sys; sys.exit(importlib.util.find_spec('$mod') is None)"
      fi
      python3 -c "$check" 2>/dev/null || {
        case "$how" in
          *-pip)  # a rosdep pip rule: python3-<name>-pip installs <name> from PyPI
            how="${how#python3-}"
            how="rosdep install --from-paths . -y --ignore-src, or pip install ${how%-pip}" ;;
          python3-*|ros-*) how="rosdep install --from-paths . -y --ignore-src, or apt install $how" ;;
          *) how="rosdep install --from-paths . -y --ignore-src, or pip install $how" ;;
        esac
        echo "setup: ROS ${ROS_DISTRO} is sourced but python module '$mod' is missing;" \
             "install it ($how)" >&2
        return 1
      }
    done
  else
    local py="${MUSCLE_MEM_PYTHON:-python3.11}"
    if ! command -v "$py" >/dev/null 2>&1; then
      py=python3
    fi
    if ! "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      echo "setup: the ROS 2 Kilted wheels on PyPI are built for CPython 3.11 (x86_64);" \
           "'$py' is $("$py" --version 2>&1). Install Python 3.11, set MUSCLE_MEM_PYTHON," \
           "or source a ROS 2 install first." >&2
      return 1
    fi
    if [ "$(uname -m)" != x86_64 ]; then
      echo "setup: the ROS 2 Kilted wheels on PyPI exist for x86_64 only (this is $(uname -m));" \
           "source a ROS 2 install first." >&2
      return 1
    fi
    if [ ! -x "$venv/bin/python" ]; then
      echo "setup: creating $venv"
      "$py" -m venv "$venv" || return 1
    fi
    stamp="$venv/.muscle_mem_requirements"
    want="$(sha256sum "$req" | cut -d' ' -f1)"
    have="$(cat "$stamp" 2>/dev/null || true)"
    if [ "$want" != "$have" ]; then
      echo "setup: installing pinned ROS 2 Kilted wheels and Python dependencies"
      "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" || return 1
      # The wheels were built under /opt/python/cp311-cp311; their CMake and ament
      # index files still name that prefix. Point them at this venv.
      pyinc="$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")"
      npinc="$("$venv/bin/python" -c "import numpy; print(numpy.get_include())")"
      # (grep finds nothing once an earlier run fixed them: not an error, also under set -e.)
      { grep -rl /opt/python/cp311-cp311 "$venv/share" 2>/dev/null || true; } | xargs -r sed -i \
        -e "s#/opt/python/cp311-cp311/include/python3.11#$pyinc#g" \
        -e "s#/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include#$npinc#g" \
        -e "s#/opt/python/cp311-cp311#$venv#g"
      echo "$want" > "$stamp"
    fi
    # shellcheck disable=SC1091
    . "$venv/bin/activate"
    export AMENT_PREFIX_PATH="$venv" CMAKE_PREFIX_PATH="$venv"
    _mm_pip_interfaces "$root" "$venv" "$req" || return 1
  fi

  echo "setup: colcon build"
  (cd "$root" && colcon --log-base log build --symlink-install \
      --event-handlers console_cohesion- summary- status- \
      --cmake-args -DBUILD_TESTING=ON > "$root/log/build-last.txt" 2>&1) || {
    cat "$root/log/build-last.txt" >&2
    echo "setup: colcon build failed (full log above)" >&2
    return 1
  }
  # shellcheck disable=SC1091
  . "$root/install/setup.bash"
  # ament_python installs console scripts to lib/<package>, where only `ros2 run` looks
  # (and there is no `ros2` on the wheel setup): put them on PATH, once, so the README's
  # `behavior_cache --ros-args ...` and the demo's `sim_robot`, `demo_agent`, `sim_demo`
  # work as written.
  local pkg bin
  for pkg in muscle_mem_demo muscle_mem_ros; do
    bin="$root/install/$pkg/lib/$pkg"
    case ":$PATH:" in
      *":$bin:"*) ;;
      *) export PATH="$bin:$PATH" ;;
    esac
  done
  export MUSCLE_MEM_ROOT="$root"
}

# The wheel setup only: build the interfaces PyPI has no wheel of (tf2_msgs, for /tf) into
# their own prefix in the venv, and source it. Never on a ROS 2 install: a second tf2_msgs
# over the install's would break what was built against it. scripts/pip_interfaces/ holds
# the sources behind a COLCON_IGNORE, so the workspace's colcon build never sees them.
# Rebuilt only when the sources or the pinned wheels change (a stamp, as for the wheels).
_mm_pip_interfaces() {
  local root="$1" venv="$2" req="$3" src prefix stamp want
  src="$root/scripts/pip_interfaces/tf2_msgs"
  prefix="$venv/pip_interfaces"
  # The venv's own tf2_msgs (a wheel, one day), not ours from an earlier run (on PYTHONPATH).
  if PYTHONPATH='' "$venv/bin/python" -c 'import tf2_msgs.msg' 2>/dev/null; then
    return 0
  fi
  stamp="$prefix/.muscle_mem_sources"
  want="$(cat "$req" "$src/package.xml" "$src/CMakeLists.txt" "$src/msg/TFMessage.msg" \
    | sha256sum | cut -d' ' -f1)"
  if [ "$want" != "$(cat "$stamp" 2>/dev/null || true)" ] \
      || [ ! -f "$prefix/install/local_setup.bash" ]; then
    echo "setup: building tf2_msgs (TFMessage only; there is no wheel) into $prefix"
    rm -rf "$prefix" && mkdir -p "$prefix" || return 1
    (cd "$prefix" && colcon --log-base "$prefix/log" build --paths "$src" \
        --build-base "$prefix/build" --install-base "$prefix/install" --merge-install \
        --event-handlers console_cohesion- summary- status- \
        --cmake-args -DBUILD_TESTING=OFF > "$prefix/build.txt" 2>&1) || {
      cat "$prefix/build.txt" >&2
      echo "setup: building tf2_msgs failed (full log above)" >&2
      return 1
    }
    echo "$want" > "$stamp"
  fi
  # shellcheck disable=SC1091
  . "$prefix/install/local_setup.bash"
}

mkdir -p "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/log"
_mm_setup
