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

"""Install muscle_mem_ros as an ament_python package."""

from glob import glob

from setuptools import find_packages, setup

package_name = 'muscle_mem_ros'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    package_data={package_name: ['py.typed']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', glob('launch/*.launch.py')),
        ('share/' + package_name + '/config', glob('config/*.yaml')),
    ],
    # rich: the muscle-mem command's tables, trees and progress; mcap, mcap-ros2-support: its
    # MCAP export; zstandard (mcap's own dependency, imported by learn too): a rosbag2 bag
    # compressed whole (.mcap.zstd) or per message. psycopg (3) only for a postgresql:// store,
    # imported when one is opened;
    # pure Python here so a ROS install's python3-psycopg (with the system libpq) satisfies it;
    # the venv's requirements add the binary wheel, which bundles libpq.
    install_requires=['setuptools', 'numpy', 'scipy', 'pyyaml', 'pillow', 'rich', 'mcap',
                      'mcap-ros2-support', 'zstandard', 'psycopg>=3.1', 'py-trees>=2.2',
                      'pydot'],
    python_requires='>=3.10',
    zip_safe=True,
    maintainer='muscle_mem_ros maintainers',
    maintainer_email='maintainers@muscle-mem-ros.dev',
    description='Muscle memory for robots: a ROS 2 behavior cache in front of a planning agent.',
    license='Apache-2.0',
    # The linters test/test_lint.py runs with ament's settings (ament_flake8's plugin set and
    # pydocstyle for ament_pep257); pinned in requirements/kilted-py311.txt.
    extras_require={'test': [
        'pytest', 'pytest-timeout', 'flake8', 'flake8-blind-except', 'flake8-builtins',
        'flake8-class-newline', 'flake8-comprehensions', 'flake8-deprecated', 'flake8-docstrings',
        'flake8-import-order', 'flake8-quotes', 'pydocstyle', 'behaviortreepy', 'selenium',
    ]},
    entry_points={
        'console_scripts': [
            'behavior_cache = muscle_mem_ros.ros.node.main:main',
            'muscle-mem = muscle_mem_ros.cli:main',
        ],
    },
)
