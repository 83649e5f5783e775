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
The operator's page: what a cache learned, on a local web page, and approvals from it.

``muscle-mem serve STORE`` (:mod:`..cli.serve`) starts :class:`PageServer`: the task list,
each task's tree as a picture and its trust, each trajectory's steps with their traces as
plots (the tube where tolerances are known) and the cameras' thumbnails. Approving and
revoking go through the CLI's gate (:mod:`.approving`), behind :mod:`.security`. Live
events reach open pages through :class:`EventHub`: the hook an event source (a running
node's ``~/events``) publishes to. ROS-free: no module here imports rclpy.
"""

from .events import EventHub
from .server import PageServer, ServeOptions
from .views import Settings

__all__ = ['EventHub', 'PageServer', 'ServeOptions', 'Settings']
