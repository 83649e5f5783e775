"""Rows of the SQLite store <-> records.

Snapshots are pickled (features as tuples of floats; a Python API user
capture as whatever it is), so a store file must be trusted like any pickle.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import numpy as np

from ..errors import StoreCorruptError, StoreError
from ..records import Node, Snapshot, Step, StepStatus, ToolKind, TrajectoryInfo

__all__ = ['decode_snapshot', 'encode_snapshot', 'NODE_COLS', 'node_from_row', 'step_row',
           'TRAJ_COLS', 'trajectory_from_row']

NODE_COLS = ('id, parent, depth, tool, kind, type_name, payload, payload_json, pre, post,'
              ' status, duration, success_count, last_used, terminal, task, variant')
TRAJ_COLS = 'id, task, variant, params_json, node_ids, created, last_used, replay_count'


def encode_snapshot(snapshot: Snapshot | None) -> bytes | None:
    """Serialize a snapshot: features as float tuples, the user capture pickled."""
    if snapshot is None:
        return None
    features = {name: tuple(np.asarray(v, dtype=np.float64).reshape(-1).tolist())
                for name, v in snapshot.features.items()}
    stamps = {name: float(t) for name, t in snapshot.stamps.items()}
    clean = Snapshot(features=features, stamps=stamps, taken_at=float(snapshot.taken_at),
                     user=snapshot.user)
    try:
        return pickle.dumps(clean, protocol=5)
    except Exception as err:
        raise StoreError(f'cannot store snapshot: user capture is not picklable: {err}') from err


def decode_snapshot(data: bytes | None) -> Snapshot | None:
    """Inverse of :func:`encode_snapshot` (unpickling builds the Snapshot in C: fast)."""
    if data is None:
        return None
    snapshot = pickle.loads(data)
    if not isinstance(snapshot, Snapshot):
        raise StoreCorruptError(f'stored snapshot is a {type(snapshot).__name__}')
    return snapshot


def node_from_row(row: tuple[Any, ...]) -> Node:
    """Build a Node from a row selected with NODE_COLS."""
    step = Step(tool=row[3], kind=ToolKind(row[4]), type_name=row[5], payload=bytes(row[6]),
                payload_json=row[7], pre=decode_snapshot(row[8]), post=decode_snapshot(row[9]),
                status=StepStatus(row[10]), duration=row[11])
    return Node(id=row[0], parent=row[1], depth=row[2], step=step, success_count=row[12],
                last_used=row[13], terminal=bool(row[14]))


def trajectory_from_row(row: tuple[Any, ...]) -> TrajectoryInfo:
    """Build a TrajectoryInfo from a row selected with TRAJ_COLS."""
    return TrajectoryInfo(id=row[0], task=row[1], variant=row[2], params_json=row[3],
                          node_ids=tuple(json.loads(row[4])), created=row[5],
                          last_used=row[6], replay_count=row[7])


def step_row(step: Step) -> tuple[Any, ...]:
    """Return the step columns from ``tool`` to ``duration``, in table order."""
    return (step.tool, step.kind.value, step.type_name, bytes(step.payload), step.payload_json,
            encode_snapshot(step.pre), encode_snapshot(step.post), step.status.value,
            float(step.duration))
