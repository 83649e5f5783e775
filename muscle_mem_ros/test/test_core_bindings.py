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

"""Bindings in the core: learning them, resolving them, the walk's shift, variants, filing."""

from __future__ import annotations

import json

from muscle_mem_ros.bindings.filing import explains
from muscle_mem_ros.bindings.judge import advance, resolve, Shift
from muscle_mem_ros.bindings.learning import bound_params, learn
from muscle_mem_ros.bindings.rules import DECLARED, Declared, element_tolerances, INFERRED, leaves
from muscle_mem_ros.bindings.variants import Variant
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.records import CompareMode, Node, SensorSpec, Snapshot, Step, ToolKind
import pytest

SENSORS = [SensorSpec('object', (0.02,), CompareMode.NORM),
           SensorSpec('ee', (0.02,), CompareMode.NORM)]
TOL = element_tolerances(SENSORS)
CHECK = ToleranceCheck(sensors=SENSORS)


def snap(obj, ee=(0.0, 0.0, 0.5)):
    return Snapshot(features={'object': tuple(obj), 'ee': tuple(ee)}, taken_at=1.0)


def move(node_id, x, y, obj, *, ee_after=None, z=0.1, tool='/arm/move', parent=None, depth=0):
    """Return a MoveToPose-like step to (x, y, z), the cube at ``obj``; the tool ends there."""
    goal = {'target': {'header': {'frame_id': 'world'},
                       'pose': {'position': {'x': x, 'y': y, 'z': z}}}}
    post_ee = ee_after if ee_after is not None else (x, y, z)
    step = Step(tool=tool, kind=ToolKind.ACTION, type_name='demo/action/MoveToPose',
                payload=json.dumps(goal).encode(), payload_json=json.dumps(goal),
                pre=snap(obj), post=snap(obj, post_ee))
    return Node(node_id, parent, depth, step)


def test_leaves_flatten_numbers_and_strings_only():
    value = {'a': {'b': [1, 2.5]}, 'c': 'x', 'd': True, 'e': None}
    assert leaves(value) == {'a.b[0]': 1, 'a.b[1]': 2.5, 'c': 'x'}


def test_a_parameter_binds_from_one_recording():
    node = move(1, 0.3, -0.3, (0.4, 0.0, 0.02))
    plans = learn([([node], {'place': [0.3, -0.3]})], tolerance=TOL)
    fields = {b.field: b for b in plans[1].bindings}
    assert fields['target.pose.position.x'].source == 'param:place[0]'
    assert fields['target.pose.position.y'].source == 'param:place[1]'
    assert fields['target.pose.position.x'].origin == INFERRED
    assert 'target.pose.position.z' not in fields


def test_inference_off_binds_nothing():
    node = move(1, 0.3, -0.3, (0.4, 0.0, 0.02))
    assert learn([([node], {'place': [0.3, -0.3]})], infer=False, tolerance=TOL) == {}


def test_a_sensor_binds_from_two_recordings_with_a_constant_offset():
    a = move(1, 0.40, 0.00, (0.40, 0.00, 0.02), z=0.15)
    b = move(2, 0.45, 0.03, (0.45, 0.03, 0.02), z=0.15)
    plans = learn([([a], {}), ([b], {})], tolerance=TOL)
    fields = {bd.field: bd for bd in plans[1].bindings}
    assert fields['target.pose.position.x'].source == 'sensor:object[0]'
    assert fields['target.pose.position.y'].source == 'sensor:object[1]'
    assert fields['target.pose.position.x'].offset == pytest.approx(0.0)
    assert 'target.pose.position.z' not in fields  # it did not vary
    assert plans[1].bindings == plans[2].bindings


def test_one_recording_infers_no_sensor_binding():
    a = move(1, 0.40, 0.00, (0.40, 0.00, 0.02))
    assert 1 not in learn([([a], {})], tolerance=TOL)


def test_a_field_that_varied_inconsistently_is_never_bound():
    a = move(1, 0.40, 0.00, (0.40, 0.00, 0.02))
    b = move(2, 0.50, 0.03, (0.45, 0.03, 0.02))  # x moved 10 cm, the cube 5 cm
    plans = learn([([a], {}), ([b], {})], tolerance=TOL)
    fields = {bd.field for bd in plans.get(1, ()).bindings} if 1 in plans else set()
    assert 'target.pose.position.x' not in fields
    assert 'target.pose.position.y' in fields


def test_declared_sensor_binding_fits_its_offset_from_one_recording():
    a = move(1, 0.41, 0.00, (0.40, 0.00, 0.02))
    decl = Declared('/arm/move', 'target.pose.position', 'sensor:object', 0.1)
    plans = learn([([a], {})], declared=[decl], infer=False, tolerance=TOL)
    fields = {b.field: b for b in plans[1].bindings}
    assert fields['target.pose.position.x'].offset == pytest.approx(0.01)
    assert fields['target.pose.position.x'].origin == DECLARED
    assert fields['target.pose.position.z'].source == 'sensor:object[2]'
    far = move(2, 0.10, 0.00, (0.40, 0.00, 0.02))  # 30 cm from the cube: not relative to it
    plans = learn([([far], {})], declared=[decl], infer=False, tolerance=TOL)
    assert 'target.pose.position.x' not in {b.field for b in plans[2].bindings}


def test_resolve_substitutes_within_range_and_refuses_beyond_or_missing():
    a = move(1, 0.40, 0.00, (0.40, 0.00, 0.02))
    decl = Declared('/arm/move', 'target.pose.position.x', 'sensor:object[0]', 0.1)
    plan = learn([([a], {})], declared=[decl], infer=False, tolerance=TOL)[1]
    bound = resolve(plan, 0, a, {}, snap((0.46, 0.0, 0.02)))
    assert not bound.problem
    assert bound.values['target.pose.position.x'] == pytest.approx(0.46)
    assert [s.source for s in bound.substitutions] == ['sensor:object[0]']
    far = resolve(plan, 0, a, {}, snap((0.55, 0.0, 0.02)))
    assert 'max_shift' in far.problem
    gone = resolve(plan, 0, a, {}, Snapshot(features={'ee': (0, 0, 0.5)}))
    assert 'missing' in gone.problem


def test_a_missing_parameter_never_resolves():
    node = move(1, 0.3, -0.3, (0.4, 0.0, 0.02))
    plan = learn([([node], {'place': [0.3, -0.3]})], tolerance=TOL)[1]
    assert 'missing' in resolve(plan, 0, node, {}, snap((0.4, 0, 0.02))).problem
    ok = resolve(plan, 0, node, {'place': [0.25, -0.3]}, snap((0.4, 0, 0.02)))
    assert ok.values['target.pose.position.x'] == 0.25


def test_shift_moves_followed_post_elements_and_ends_where_the_step_put_them():
    a = move(1, 0.40, 0.00, (0.40, 0.00, 0.02))
    decl = Declared('/arm/move', 'target.pose.position.x', 'sensor:object[0]', 0.1)
    plan = learn([([a], {})], declared=[decl], infer=False, tolerance=TOL)[1]
    assert ('sensor:ee[0]', 'target.pose.position.x') in plan.follows
    now = snap((0.45, 0.0, 0.02))
    bound = resolve(plan, 0, a, {}, now)
    shift = Shift()
    expected = shift.expected(a.step.pre, bound.sources)
    assert CHECK.evaluate(expected, now, now_time=1.0).passed
    assert not CHECK.evaluate(a.step.pre, now, now_time=1.0).passed  # literally a miss
    advance(shift, a, TOL, plan, bound)
    assert shift.by_element['sensor:object[0]'] == pytest.approx(0.05)
    assert shift.by_element['sensor:ee[0]'] == pytest.approx(0.05)
    post = shift.expected(a.step.post)
    assert post.features['ee'][0] == pytest.approx(0.45)
    # A later unbound step that moved the tool to an absolute place ends the tool's shift.
    home = Node(2, 1, 1, Step(tool='/arm/home', kind=ToolKind.ACTION, type_name='x',
                              payload=b'', pre=snap((0.40, 0, 0.02), (0.40, 0.0, 0.1)),
                              post=snap((0.40, 0, 0.02), (0.0, 0.0, 0.5))))
    advance(shift, home, TOL)
    assert 'sensor:ee[0]' not in shift.by_element
    assert shift.by_element['sensor:object[0]'] == pytest.approx(0.05)  # the cube stayed


def test_a_later_binding_lets_earlier_steps_accept_its_source_within_range():
    first = Node(1, None, 0, Step(tool='/gripper', kind=ToolKind.SERVICE, type_name='x',
                                  payload=b'', payload_json='{"data":true}',
                                  pre=snap((0.4, 0, 0.02)), post=snap((0.4, 0, 0.02))))
    second = move(2, 0.40, 0.00, (0.40, 0.00, 0.02), parent=1, depth=1)
    decl = Declared('/arm/move', 'target.pose.position.x', 'sensor:object[0]', 0.1)
    plans = learn([([first, second], {})], declared=[decl], infer=False, tolerance=TOL)
    assert plans[1].ahead == (('sensor:object[0]', 0.1),)
    near = resolve(plans[1], 0, first, {}, snap((0.45, 0, 0.02)))
    assert not near.problem and near.sources == {'sensor:object[0]': 0.45}
    assert 'max_shift' in resolve(plans[1], 0, first, {}, snap((0.6, 0, 0.02))).problem


def bound_variant(params, sources):
    return Variant.bound(params, sources).text


def match_variant(variant, params):
    return Variant.parse(variant).fits(params)


def test_variants_bind_parameters_and_need_every_key():
    variant = bound_variant({'place': [0.3, -0.3], 'obj': 'cube'},
                            {'param:place[0]', 'param:place[1]'})
    assert match_variant(variant, {'place': [0.2, -0.1], 'obj': 'cube'})
    assert not match_variant(variant, {'place': [0.2, -0.1], 'obj': 'ball'})
    assert not match_variant(variant, {'obj': 'cube'})
    assert not match_variant(variant, {'place': [0.2], 'obj': 'cube'})


def test_bound_params_finds_the_parameters_a_recording_used():
    node = move(1, 0.3, -0.3, (0.4, 0.0, 0.02))
    assert bound_params([node.step], {'place': [0.3, -0.3], 'n': 0}) == {
        'param:place[0]', 'param:place[1]'}
    assert bound_params([node.step], {'place': [0.3, -0.3]}, infer=False) == set()


def test_explains_merges_only_steps_its_bindings_account_for():
    a = move(1, 0.40, 0.00, (0.40, 0.00, 0.02))
    decl = Declared('/arm/move', 'target.pose.position', 'sensor:object', 0.1)
    plan = learn([([a], {})], declared=[decl], infer=False, tolerance=TOL)[1]
    same = move(9, 0.45, 0.02, (0.45, 0.02, 0.02)).step
    assert explains(plan, a, same, {}, CHECK, TOL) is not None
    other = move(9, 0.50, 0.02, (0.45, 0.02, 0.02)).step  # x not where the cube says
    assert explains(plan, a, other, {}, CHECK, TOL) is None
    far = move(9, 0.60, 0.00, (0.60, 0.00, 0.02)).step  # beyond max_shift
    assert explains(plan, a, far, {}, CHECK, TOL) is None


def test_two_sources_that_explain_a_field_equally_leave_it_unbound():
    a = move(1, 0.40, 0.00, (0.40, 0.00, 0.02))
    b = move(2, 0.45, 0.05, (0.45, 0.05, 0.02))  # the cube moved as much in x as in y
    assert 1 not in learn([([a], {}), ([b], {})], tolerance=TOL)
    c = move(3, 0.42, 0.06, (0.42, 0.06, 0.02))  # a third recording tells them apart
    plans = learn([([a], {}), ([b], {}), ([c], {})], tolerance=TOL)
    fields = {bd.field: bd.source for bd in plans[1].bindings}
    assert fields == {'target.pose.position.x': 'sensor:object[0]',
                      'target.pose.position.y': 'sensor:object[1]'}


def test_only_elements_the_step_moved_follow_a_field():
    node = move(1, 0.40, 0.00, (0.40, 0.00, 0.02))
    decl = Declared('/arm/move', 'target.pose.position.x', 'sensor:object[0]', 0.1)
    plan = learn([([node], {})], declared=[decl], infer=False, tolerance=TOL)[1]
    assert ('sensor:ee[0]', 'target.pose.position.x') in plan.follows  # the tool moved there
    assert all(key != 'sensor:object[0]' for key, _ in plan.follows)  # the cube stayed put


def test_sources_equal_in_every_recording_are_one_explanation_not_rivals():
    # The previous step put the tool above the cube: at this step both read the same x, y.
    def over(node_id, x, y):
        node = move(node_id, x, y, (x, y, 0.02))
        pre = Snapshot(features={'object': (x, y, 0.02), 'ee': (x, y, 0.15)}, taken_at=1.0)
        return Node(node_id, None, 0, Step(tool=node.step.tool, kind=node.step.kind,
                                           type_name=node.step.type_name,
                                           payload=node.step.payload,
                                           payload_json=node.step.payload_json, pre=pre,
                                           post=node.step.post))
    plans = learn([([over(1, 0.40, 0.00)], {}), ([over(2, 0.46, 0.03)], {})], tolerance=TOL)
    fields = {b.field for b in plans[1].bindings}
    assert fields == {'target.pose.position.x', 'target.pose.position.y'}


def test_a_field_pairs_only_with_the_element_of_its_axis():
    # The tool ends 0.15 m high; the bound y is 0.16: a height is not a y.
    node = move(1, 0.40, 0.16, (0.40, 0.16, 0.02), z=0.15)
    decl = Declared('/arm/move', 'target.pose.position.y', 'sensor:object[1]', 0.1)
    plan = learn([([node], {})], declared=[decl], infer=False, tolerance=TOL)[1]
    assert ('sensor:ee[1]', 'target.pose.position.y') in plan.follows
    assert all(key != 'sensor:ee[2]' for key, _ in plan.follows)


def test_a_step_that_moved_a_sensor_ends_the_shift_of_all_its_elements():
    shift = Shift()
    shift.by_element.update({'sensor:ee[0]': 0.05, 'sensor:ee[1]': 0.02,
                             'sensor:object[0]': 0.05})
    # The move home: x ends 1 cm from where it was, y and z move a lot.
    home = Node(2, 1, 1, Step(tool='/arm/home', kind=ToolKind.ACTION, type_name='x',
                              payload=b'', pre=snap((0.45, 0, 0.02), (0.30, -0.3, 0.1)),
                              post=snap((0.45, 0, 0.02), (0.29, 0.0, 0.4))))
    advance(shift, home, TOL)
    assert shift.by_element == {'sensor:object[0]': 0.05}


def test_a_source_is_parsed_once_into_its_kind_name_and_index():
    from muscle_mem_ros.bindings.rules import Source, SourceKind
    for text, kind, name, index in (
            ('param:place[0]', SourceKind.PARAM, 'place[0]', None),
            ('param:pts[1].x', SourceKind.PARAM, 'pts[1].x', None),
            ('sensor:object[2]', SourceKind.SENSOR, 'object', 2),
            ('sensor:object', SourceKind.SENSOR, 'object', None),
            ('capture:pos[0]', SourceKind.CAPTURE, 'pos[0]', None),
            ('capture', SourceKind.CAPTURE, '', None)):
        source = Source.parse(text)
        assert (source.kind, source.name, source.index) == (kind, name, index)
        assert str(source) == text
    for bad in ('', 'param:', 'object[0]', 'sensor:a[b]', 'topic:/x'):
        with pytest.raises(ValueError):
            Source.parse(bad)


def test_non_finite_goal_values_are_never_leaves():
    from muscle_mem_ros.bindings.rules import goal_leaves
    step = Step(tool='/arm/move', kind=ToolKind.ACTION, type_name='t', payload=b'x',
                payload_json=json.dumps({'x': 0.3, 'tol': 'nan', 'far': 'inf', 'n': 2,
                                         'ok': True}))
    assert goal_leaves(step) == {'x': 0.3, 'n': 2}
    assert leaves({'a': float('nan'), 'b': [float('inf'), 1.5]}) == {'b[1]': 1.5}


def test_a_refused_binding_names_its_source_and_sensor():
    from muscle_mem_ros.bindings.judge import binding_failure, Bound
    far = binding_failure(Bound({}, (), {}, {}, problem='x would move 0.2',
                                source='sensor:object[0]', excess=0.2, limit=0.1))
    assert (far.sensor, far.source, far.score) == ('object', 'sensor:object[0]', 2.0)
    gone = binding_failure(Bound({}, (), {}, {}, problem='parameter param:place[0] missing',
                                 source='param:place[0]', excess=float('inf')))
    assert (gone.sensor, gone.source) == ('', 'param:place[0]')
    assert Variant.bound({'place': [1.0, 2.0]}, {'param:place[0]'}).has_bound
    assert not Variant.parse('{"place":[1.0,2.0]}').has_bound


def test_a_value_equal_to_the_recording_but_for_float_noise_is_not_a_substitution():
    from muscle_mem_ros.bindings.judge import changes
    first = move(1, 0.4, -0.3, (0.4, 0.0, 0.02))
    second = move(2, 0.45, -0.3, (0.45, 0.0, 0.02))
    plans = learn([([first], {}), ([second], {})], tolerance=TOL)
    assert plans, 'x follows the object'
    noise = resolve(plans[1], 0, first, {}, snap((0.4 + 5e-11, 0.0, 0.02)))
    assert not noise.problem and noise.substitutions == () and noise.values == {}
    moved = resolve(plans[1], 0, first, {}, snap((0.43, 0.0, 0.02)))
    assert [s.field for s in moved.substitutions] == ['target.pose.position.x']
    assert changes(0.4, 0.41) and not changes(0.39999999995, 0.4)
    assert changes(3, 4) and not changes(3, 3) and changes('a', 'b')


def test_a_declared_standoff_binds_with_max_offset_and_the_world_moves_only_max_shift():
    goto = move(1, 0.0, 0.0, (0.4, 0.0, 0.02))  # the base stops 0.4 m in front of the tag
    near_only = Declared('/arm/move', 'target.pose.position.x', 'sensor:object[0]', 0.1)
    assert not learn([([goto], {})], declared=[near_only], tolerance=TOL)
    standoff = Declared('/arm/move', 'target.pose.position.x', 'sensor:object[0]', 0.1,
                        max_offset=0.5)
    plans = learn([([goto], {})], declared=[standoff], tolerance=TOL)
    (binding,) = plans[1].bindings
    assert binding.offset == pytest.approx(-0.4) and binding.max_shift == 0.1
    follows = resolve(plans[1], 0, goto, {}, snap((0.45, 0.0, 0.02)))
    assert follows.values['target.pose.position.x'] == pytest.approx(0.05)
    assert 'max_shift 0.1' in resolve(plans[1], 0, goto, {}, snap((0.6, 0.0, 0.02))).problem


def test_orientation_headers_and_stamps_are_never_bound():
    goal = {'goal': {'header': {'stamp': {'sec': 1, 'nanosec': 0}, 'frame_id': 'map'},
                     'pose': {'position': {'x': 0.5, 'y': 1.3, 'z': 0.0},
                              'orientation': {'x': 0.0, 'y': 0.0, 'z': 0.0, 'w': 1.0}}}}
    step = Step(tool='/goto', kind=ToolKind.SERVICE, type_name='nav_msgs/srv/GetPlan',
                payload=b'x', payload_json=json.dumps(goal))
    node = Node(1, None, 0, step)
    shelf = learn([([node], {'shelf': [0.5, 1.3], 'w': 1.0, 'frame': 'map'})], tolerance=TOL)
    fields = {b.field: b.source for b in shelf[1].bindings}
    assert fields == {'goal.pose.position.x': 'param:shelf[0]',
                      'goal.pose.position.y': 'param:shelf[1]'}
    assert not learn([([node], {'bin': 1})], tolerance=TOL)  # w = 1.0 is not the bin


def test_a_scan_is_not_an_inferred_source_unless_set_to_auto():
    from muscle_mem_ros.bindings.rules import sensor_sources
    specs = [SensorSpec('object', (0.02,), CompareMode.NORM),
             SensorSpec('scan', (0.05,), CompareMode.NORM)]
    tolerance = element_tolerances(specs)

    def recording(node_id, obj_x, y, ranges):
        goal = {'target': {'pose': {'position': {'x': obj_x, 'y': y, 'z': 0.1}}}}
        pre = Snapshot(features={'object': (obj_x, 0.0, 0.02), 'scan': tuple(ranges)})
        step = Step(tool='/arm/move', kind=ToolKind.ACTION, type_name='demo/action/MoveToPose',
                    payload=json.dumps(goal).encode(), payload_json=json.dumps(goal), pre=pre)
        return ([Node(node_id, None, 0, step)], {})

    base = [1.0 + 0.5 * (i % 7) for i in range(360)]
    moved = list(base)
    moved[42] += 0.12  # y moved 12 cm for a reason no sensor sees; range 42 by chance too
    paths = [recording(1, 0.40, -0.30, base), recording(2, 0.45, -0.18, moved)]
    fields = {b.field: b.source for b in learn(paths, tolerance=tolerance)[1].bindings}
    assert fields['target.pose.position.y'] == 'sensor:scan[42]'  # the coincidence
    safe = learn(paths, tolerance=tolerance, sources=sensor_sources(specs))
    assert {b.field: b.source for b in safe[1].bindings} == {
        'target.pose.position.x': 'sensor:object[0]'}  # the cube still binds
    opted = [specs[0], SensorSpec('scan', (0.05,), CompareMode.NORM, bind='auto')]
    chosen = learn(paths, tolerance=tolerance, sources=sensor_sources(opted))
    assert 'target.pose.position.y' in {b.field for b in chosen[1].bindings}
    never = [SensorSpec('object', (0.02,), CompareMode.NORM, bind='never'), specs[1]]
    assert not learn(paths, tolerance=tolerance, sources=sensor_sources(never))


def test_a_parameter_is_bound_for_other_values_only_after_a_second_value_followed():
    from muscle_mem_ros.bindings.filing import witnessed
    first = move(1, 0.3, -0.3, (0.4, 0.0, 0.02)).step
    second = move(2, 0.5, -0.3, (0.4, 0.0, 0.02)).step
    params = {'place': [0.5, -0.3], 'speed': 1}
    assert witnessed([second], params, lambda: ()) == set()  # one equality: no evidence
    followed = [({'place': [0.3, -0.3], 'speed': 1}, [first])]
    assert witnessed([second], params, lambda: followed) == {'param:place[0]'}
    # y had the same value in both: nothing showed it following the parameter
    constant = [({'place': [0.3, -0.3], 'speed': 1}, [move(3, 0.5, -0.3, (0.4, 0, 0.02)).step])]
    assert witnessed([second], params, lambda: constant) == set()  # x stayed 0.5: a constant
    other_task = [({'place': [0.3, -0.3], 'speed': 2}, [first])]
    assert witnessed([second], params, lambda: other_task) == set()  # another parameter differs


def test_integer_codes_bind_only_an_integer_parameter_and_never_a_sensor():
    def coded(node_id, code, x, obj_x):
        goal = {'mode': code, 'x': x}
        step = Step(tool='/base/goto', kind=ToolKind.ACTION, type_name='demo/action/Goto',
                    payload=json.dumps(goal).encode(), payload_json=json.dumps(goal),
                    pre=snap((obj_x, 0.0, 0.02)))
        return Node(node_id, None, 0, step)

    plans = learn([([coded(1, 2, 0.5, 0.4)], {'speed': 2.0, 'bin': 2, 'x': 0.5})],
                  tolerance=TOL)
    assert {b.field: b.source for b in plans[1].bindings} == {
        'mode': 'param:bin', 'x': 'param:x'}  # not the float 2.0
    # mode is the object's x plus 1.6 in both recordings: an integer never follows a sensor
    paths = [([coded(1, 2, 0.5, 0.4)], {}), ([coded(2, 3, 1.5, 1.4)], {})]
    fields = {b.field: b.source for p in learn(paths, tolerance=TOL).values() for b in p.bindings}
    assert 'mode' not in fields and fields['x'] == 'sensor:object[0]'


def test_a_declared_parameter_binds_only_the_goals_that_were_its_value():
    to_cube = move(1, 0.40, 0.00, (0.40, 0.00, 0.02))
    to_place = move(2, 0.30, -0.30, (0.40, 0.00, 0.02), parent=1, depth=1)
    decl = Declared('/arm/move', 'target.pose.position.x', 'param:place[0]', None)
    plans = learn([([to_cube, to_place], {'place': [0.3, -0.3]})], declared=[decl],
                  infer=False, tolerance=TOL)
    assert list(plans) == [2]
    assert plans[2].bindings[0].source == 'param:place[0]'
