# Copyright 2026 muscle_mem_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""
The demo's arms: real arm models read from a PyPI wheel, and the table scene built around them.

The models come from the ``gymnasium-robotics`` wheel (pinned in requirements/): only its
model files are read (MJCF and meshes), located with :func:`importlib.util.find_spec`, which
finds the package without importing it (its ``__init__`` imports gymnasium). They are loaded in
plain MuJoCo with ``MjSpec`` and adapted there, in code, for the demo:

* joints, bodies and actuators get the names a ROS user knows (``panda_joint1`` ...
  ``panda_joint7``, ``panda_finger_joint1/2``, as franka_description names them);
* the arm is gravity compensated and its geoms do not collide, so its position servos
  track a trajectory the same way every time (a replayed motion is repeatable);
* its servos are stiffened: the model's joint damping (100 and 10 N m s/rad, set for slow
  kitchen tasks) against its torque limits (87 and 12 N m) would make the arm lag a 0.8 s
  move by 0.4 rad and settle 0.6 s late; the demo replaces it with a position servo of gain
  ``kp`` and damping ``kv`` per joint (:data:`SERVOS`), a rotor inertia (armature) and
  wider force limits. The kinematics (the bodies, joint axes and limits) are the model's;
* the fingers get a light armature and damping, so the jaws settle in a fraction of a second;
* a ``grasp`` site between the finger pads is the tool point, a table (top at z = 0), a 4 cm
  cube on a free joint, a ``grasp`` weld (the attach stand-in), the camera
  (:mod:`.camera`) and its distractor, a 6 cm box parked out of sight (:mod:`.distractor`),
  are added.

:func:`build_scene` compiles that for a named arm; :func:`build_arm` the arm alone (for
kinematics); :func:`description` is the arm's MJCF as the sim robot publishes it on
``/robot_description`` (its mesh paths relative to the wheel, so the text is the same on
every machine that has the same wheel).
"""

from __future__ import annotations

from dataclasses import dataclass
import functools
import importlib.util
import math
import os

import mujoco
from muscle_mem_demo import camera, distractor

__all__ = [
    'ARMS',
    'ArmModel',
    'ModelFilesError',
    'OBJECT_START',
    'build_arm',
    'build_scene',
    'description',
    'model_root',
]

OBJECT_START: tuple[float, float, float] = (0.5, 0.2, 0.02)
"""Where the cube rests after a reset (centre, table frame, metres)."""

WHEEL = 'gymnasium-robotics==1.4.2'
"""The wheel the model files come from (requirements/kilted-py311.txt pins it)."""


class ModelFilesError(RuntimeError):
    """The arm's model files are not installed (the wheel is missing) or do not load."""


@dataclass(frozen=True)
class ArmModel:
    """What the demo needs to know of one arm model beyond its MJCF."""

    name: str
    """Short name: the ``arm`` parameter, and the model name in ``/robot_description``."""
    arm_joints: tuple[str, ...]
    """Joints the trajectory action moves, in /joint_states order."""
    gripper_joints: tuple[str, ...]
    """The finger joints, listed after the arm joints."""
    home: tuple[float, ...]
    """Arm joint positions at rest, gripper pointing down above the table."""
    gripper_open: float
    """Finger joint position when open."""
    gripper_closed: float
    """Finger joint position when closed on nothing."""
    hand_body: str
    """The body carrying the grasp site, welded to the cube when it is grasped."""
    folder: str
    """Folder of the model files inside the wheel's package."""


ARMS: dict[str, ArmModel] = {
    'panda': ArmModel(
        name='panda',
        arm_joints=tuple(f'panda_joint{i}' for i in range(1, 8)),
        gripper_joints=('panda_finger_joint1', 'panda_finger_joint2'),
        home=(0.0, -0.785, 0.0, -2.356, 0.0, 0.0, 0.0),
        gripper_open=0.04,
        gripper_closed=0.0,
        hand_body='panda_link7',
        folder='envs/assets/kitchen_franka/franka_assets',
    ),
    'fetch': ArmModel(
        name='fetch',
        arm_joints=('shoulder_pan_joint', 'shoulder_lift_joint', 'upperarm_roll_joint',
                    'elbow_flex_joint', 'forearm_roll_joint', 'wrist_flex_joint',
                    'wrist_roll_joint'),
        gripper_joints=('r_gripper_finger_joint', 'l_gripper_finger_joint'),
        home=(0.0, -1.0, 0.0, 0.6, 0.0, 2.0, 0.0),
        gripper_open=0.05,
        gripper_closed=0.0,
        hand_body='gripper_link',
        folder='envs/assets/fetch',
    ),
}
"""The arms :func:`build_scene` can build, by name."""

_GRASP_OFFSET = 0.24
"""The grasp site's distance along the Panda's link7 axis, metres: between the finger pads,
1.3 cm above their tips."""
SERVOS: tuple[tuple[float, float, float], ...] = (
    (4000.0, 200.0, 400.0),
    (4000.0, 200.0, 400.0),
    (4000.0, 200.0, 400.0),
    (4000.0, 200.0, 400.0),
    (1000.0, 50.0, 100.0),
    (1000.0, 50.0, 100.0),
    (1000.0, 50.0, 100.0),
)
"""The Panda's servos as the demo drives them: (kp N m/rad, kv N m s/rad, force limit N m)."""
_ARM_ARMATURE = 0.1
_FINGER_ARMATURE = 0.05
_FINGER_DAMPING = 10.0


def model_root() -> str:
    """
    Return the folder of the installed gymnasium_robotics package, without importing it.

    :raises ModelFilesError: the package is not installed.
    """
    spec = importlib.util.find_spec('gymnasium_robotics')
    if spec is None or not spec.submodule_search_locations:
        raise ModelFilesError(
            f'the arm models come from the {WHEEL} wheel, which is not installed '
            f'(pip install {WHEEL}, or rosdep install: key python3-gymnasium-robotics-pip)')
    return str(list(spec.submodule_search_locations)[0])


def _arm(name: str) -> ArmModel:
    try:
        return ARMS[name]
    except KeyError:
        raise ValueError(f'unknown arm {name!r}: one of {sorted(ARMS)}') from None


def _load(arm: ArmModel, label: str, files: list[str], xml: str) -> mujoco.MjSpec:
    """Return the spec of ``xml`` (which includes ``files``), named as the arm; say what failed."""
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise ModelFilesError(f'{WHEEL}: model files missing: {missing}')
    try:
        spec = mujoco.MjSpec.from_string(xml)
    except ValueError as err:
        raise ModelFilesError(f'{WHEEL}: the {label} model does not load: {err}') from err
    spec.modelname = arm.name
    return spec


def _panda_spec(arm: ArmModel) -> tuple[mujoco.MjSpec, str]:
    """Return the Panda's spec, adapted for the demo, and the folder of its files."""
    folder = os.path.join(model_root(), arm.folder)
    files = [os.path.join(folder, f) for f in ('assets.xml', 'actuator.xml', 'chain.xml')]
    spec = _load(arm, 'Panda', files, f'<mujoco model="{arm.name}"><include file="{files[0]}"/>'
                 f'<include file="{files[1]}"/><worldbody><include file="{files[2]}"/>'
                 '</worldbody></mujoco>')
    spec.meshdir = ''
    for mesh in spec.meshes:
        mesh.file = os.path.join(folder, 'meshes', os.path.relpath(mesh.file, folder))
    renamed: dict[str, str] = {}
    for joint in spec.joints:
        new = joint.name.replace('robot:panda0_', 'panda_')
        renamed[joint.name] = new
        joint.name = new
    for body in spec.bodies:
        if body.name.startswith('panda0_'):
            body.name = body.name.replace('panda0_', 'panda_')
            body.gravcomp = 1.0
    for geom in spec.geoms:
        geom.contype = 0
        geom.conaffinity = 0
    for actuator in spec.actuators:
        actuator.target = renamed.get(actuator.target, actuator.target)
        actuator.name = actuator.target
    for name, (kp, kv, force) in zip(arm.arm_joints, SERVOS, strict=True):
        joint = spec.joint(name)
        joint.damping = [0.0, 0.0, 0.0]
        joint.armature = _ARM_ARMATURE
        servo = spec.actuator(name)
        servo.gainprm[0] = kp
        servo.biasprm[0:3] = [0.0, -kp, -kv]
        servo.forcerange = [-force, force]
    for name in arm.gripper_joints:
        finger = spec.joint(name)
        finger.armature = _FINGER_ARMATURE
        finger.damping = [_FINGER_DAMPING, 0.0, 0.0]
    hand = spec.body(arm.hand_body)
    hand.add_site(name='grasp', pos=[0.0, 0.0, _GRASP_OFFSET], size=[0.005, 0.005, 0.005],
                  euler=[0.0, 0.0, -0.785398])
    return spec, folder


_FETCH_BASE = (-0.1826, 0.0, -0.75)
"""Where the Fetch's base stands: on the floor, its shoulder 15 cm behind the table's origin."""
_FETCH_FINGER_KP = 2000.0
_FETCH_FINGER_KV = 150.0
"""The Fetch's finger servos (N/m, N s/m): its fingers weigh 4 kg each in the wheel's model,
so a softer or undamped servo lets them ring around the cube for a second after a grasp (the
jaws read 0.004 to 0.034 m), and a replayed grasp would not find them where it learned them."""
_FETCH_TORSO = 0.3861
"""The Fetch's torso lift, fixed at its top (m): the shoulder 36 cm above the table."""


def _fetch_spec(arm: ArmModel) -> tuple[mujoco.MjSpec, str]:
    """
    Return the Fetch's arm, adapted for the demo, and the folder of its files.

    The wheel's Fetch is driven by a mocap weld (no arm actuators) on a base that slides:
    the demo deletes the mocap body and its weld, the base's slides, the torso lift (fixed at
    its top) and the head's joints, names the rest as the real robot does (``robot0:``
    dropped), and gives the seven arm joints and two fingers position servos.
    """
    folder = os.path.join(model_root(), arm.folder)
    files = [os.path.join(folder, f) for f in ('shared.xml', 'robot.xml')]
    spec = _load(arm, 'Fetch', files, f'<mujoco model="{arm.name}"><compiler angle="radian"/>'
                 f'<include file="{files[0]}"/><worldbody><include file="{files[1]}"/>'
                 '</worldbody></mujoco>')
    assets = os.path.dirname(folder)
    for mesh in spec.meshes:
        mesh.file = os.path.join(assets, 'stls', 'fetch', os.path.basename(mesh.file))
    for texture in spec.textures:
        if texture.file:
            texture.file = os.path.join(assets, 'textures', os.path.basename(texture.file))
    for equality in list(spec.equalities):
        spec.delete(equality)
    for exclude in list(spec.excludes):  # they name bodies renamed below; nothing collides
        spec.delete(exclude)
    spec.delete(spec.body('robot0:mocap'))
    for name in ('slide0', 'slide1', 'slide2', 'torso_lift_joint', 'head_pan_joint',
                 'head_tilt_joint'):
        spec.delete(spec.joint(f'robot0:{name}'))
    for joint in spec.joints:
        joint.name = joint.name.removeprefix('robot0:')
        joint.stiffness = [0.0, 0.0, 0.0]
        joint.frictionloss = 0.0
    for body in spec.bodies:
        if body.name.startswith('robot0:'):
            body.name = body.name.removeprefix('robot0:')
            body.gravcomp = 1.0
    for geom in spec.geoms:
        geom.contype = 0
        geom.conaffinity = 0
    base = spec.body('base_link')
    base.pos = list(_FETCH_BASE)
    torso = spec.body('torso_lift_link')
    torso.pos = [torso.pos[0], torso.pos[1], torso.pos[2] + _FETCH_TORSO]
    for name, (kp, kv, force) in zip(arm.arm_joints, SERVOS, strict=True):
        joint = spec.joint(name)
        joint.damping = [0.0, 0.0, 0.0]
        joint.armature = _ARM_ARMATURE
        lower, upper = (joint.range if joint.limited == mujoco.mjtLimited.mjLIMITED_TRUE
                        else (-math.pi, math.pi))
        spec.add_actuator(name=name, target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT,
                          gainprm=[kp] + [0.0] * 9, biasprm=[0.0, -kp, -kv] + [0.0] * 7,
                          biastype=mujoco.mjtBias.mjBIAS_AFFINE,
                          ctrlrange=[lower, upper], ctrllimited=mujoco.mjtLimited.mjLIMITED_TRUE,
                          forcerange=[-force, force],
                          forcelimited=mujoco.mjtLimited.mjLIMITED_TRUE)
    for name in arm.gripper_joints:
        finger = spec.joint(name)
        finger.armature = _FINGER_ARMATURE
        finger.damping = [_FINGER_DAMPING, 0.0, 0.0]
        spec.add_actuator(name=name, target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT,
                          gainprm=[_FETCH_FINGER_KP] + [0.0] * 9,
                          biasprm=[0.0, -_FETCH_FINGER_KP, -_FETCH_FINGER_KV] + [0.0] * 7,
                          biastype=mujoco.mjtBias.mjBIAS_AFFINE,
                          ctrlrange=[arm.gripper_closed, arm.gripper_open],
                          ctrllimited=mujoco.mjtLimited.mjLIMITED_TRUE,
                          forcerange=[-70.0, 70.0],
                          forcelimited=mujoco.mjtLimited.mjLIMITED_TRUE)
    # the grasp site: z along the gripper's approach axis (its x), fingers closing along y
    spec.body(arm.hand_body).add_site(name='grasp', pos=[0.02, 0.0, 0.0],
                                      size=[0.005, 0.005, 0.005],
                                      quat=[0.7071068, 0.0, 0.7071068, 0.0])
    return spec, folder


def _spec(name: str) -> tuple[mujoco.MjSpec, str]:
    arm = _arm(name)
    return _fetch_spec(arm) if name == 'fetch' else _panda_spec(arm)


@functools.lru_cache(maxsize=None)
def build_arm(name: str = 'panda') -> mujoco.MjModel:
    """
    Return the compiled arm alone (no table, no cube), for kinematics; cached per process.

    :raises ValueError: an unknown arm.
    :raises ModelFilesError: the wheel is missing or its files do not load.
    """
    spec, _folder = _spec(name)
    return spec.compile()


@functools.lru_cache(maxsize=None)
def description(name: str = 'panda') -> str:
    """
    Return the arm's MJCF as published on ``/robot_description``.

    Mesh paths are relative to the wheel's package folder, so two machines with the same
    wheel publish the same text.
    """
    spec, _folder = _spec(name)
    spec.compile()
    root = model_root().rstrip(os.sep) + os.sep
    return spec.to_xml().replace(root, '')


def build_scene(name: str = 'panda', *, object_start: tuple[float, ...] = OBJECT_START
                ) -> mujoco.MjModel:
    """
    Return the compiled scene: the arm at the origin, table, cube, weld, camera, distractor.

    :raises ValueError: an unknown arm.
    :raises ModelFilesError: the wheel is missing or its files do not load.
    """
    arm = _arm(name)
    spec, _folder = _spec(name)
    spec.option.timestep = 0.002
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    world = spec.worldbody
    world.add_light(pos=[0.0, 0.0, 2.0], dir=[0.0, 0.0, -1.0])
    world.add_geom(name='floor', type=mujoco.mjtGeom.mjGEOM_PLANE, pos=[0.0, 0.0, -0.75],
                   size=[2.0, 2.0, 0.1], rgba=[0.8, 0.8, 0.8, 1.0], contype=0,
                   conaffinity=0)
    world.add_geom(name='table', type=mujoco.mjtGeom.mjGEOM_BOX, pos=[0.35, 0.0, -0.025],
                   size=[0.6, 0.6, 0.025], friction=[1.0, 0.005, 0.0001],
                   rgba=[0.6, 0.45, 0.3, 1.0])
    world.add_site(name='place_marker', type=mujoco.mjtGeom.mjGEOM_CYLINDER,
                   pos=[0.4, -0.3, 0.0005], size=[0.03, 0.0005, 0.0],
                   rgba=[0.2, 0.8, 0.2, 0.5])
    cube = world.add_body(name='object', pos=list(object_start))
    cube.add_freejoint(name='object_free')
    cube.add_geom(name='object', type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.02, 0.02, 0.02],
                  mass=0.1, friction=[1.0, 0.005, 0.0001], rgba=[0.15, 0.35, 0.9, 1.0])
    distractor.add_distractor(world)
    camera.add_camera(world)
    spec.add_equality(name='grasp', type=mujoco.mjtEq.mjEQ_WELD, name1=arm.hand_body,
                      name2='object', objtype=mujoco.mjtObj.mjOBJ_BODY, active=False)
    try:
        return spec.compile()
    except ValueError as err:
        raise ModelFilesError(f'the {name} scene does not compile: {err}') from err
