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
Where rclpy needs help: action clients and servers that lose nothing, waits that end.

Each module works around one rclpy behaviour (named in its docstring) for the node
and its tests: goals never lost and results known sent (``action_client``,
``action_server``), the one use of the private wait-set API (``waitset``), a clean
exit on signals (``shutdown``), waiting until an action server's feedback is
matched (``matching``), blocking waits on futures with cancellation (``sync``) and
on servers that leave the graph (``watch``), and the core's logging on ``/rosout``
(``logbridge``).
"""
