#!/usr/bin/env bash
# Set up (venv, ROS wheels, build) if needed, then run the end-to-end demo: the
# MuJoCo arm, the behavior cache and the demo planning agent, through a scripted
# story (miss, replay, nudge, mid-task bump and handoff, learned branch, a moved cube and
# another place target replayed through bindings, a cube beyond their range handed to the agent,
# a cube knocked during a replayed motion, a cube turned on the table: read from /tf, the grasp
# turned with it, or beyond max_angle handed to the agent), then tasks the agent decomposes into
# subtasks (pick, place: a skill learned under one task replayed under another, the agent not
# asked for it),
# then "eyes only": the cache sees the cube through the robot's camera alone (noise, a moved
# cube, a box outside the region of interest, a box dropped during a replayed motion).
# Arguments go to the demo, e.g. scripts/demo.sh --think-time 0.5 --rtf 2.
set -eo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck disable=SC1091
. "$root/scripts/setup.sh"
set -u
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( (RANDOM % 90) + 5 ))}"
export PYTHONUNBUFFERED=1
exec python3 -m muscle_mem_demo.demo "$@"
