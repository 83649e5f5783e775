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

"""Install muscle_mem_demo (the MuJoCo demo of muscle_mem_ros) as an ament_python package."""

from glob import glob

from setuptools import find_packages, setup

package_name = 'muscle_mem_demo'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', glob('launch/*.launch.py')),
        ('share/' + package_name + '/config', glob('config/*.yaml')),
    ],
    install_requires=['setuptools', 'numpy', 'mujoco', 'gymnasium-robotics', 'matplotlib'],
    python_requires='>=3.10',
    zip_safe=True,
    maintainer='muscle_mem_ros maintainers',
    maintainer_email='maintainers@muscle-mem-ros.dev',
    description='The MuJoCo demo of muscle_mem_ros: sim robot, demo planning agent, the story.',
    license='Apache-2.0',
    extras_require={'test': ['pytest', 'pytest-timeout']},
    entry_points={
        'console_scripts': [
            'sim_robot = muscle_mem_demo.robot_node:main',
            'demo_agent = muscle_mem_demo.agent_node:main',
            'sim_demo = muscle_mem_demo.demo:main',
        ],
    },
)
