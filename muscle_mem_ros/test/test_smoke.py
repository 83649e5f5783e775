import sys


def test_core_import_leaves_rclpy_out():
    import muscle_mem_ros  # noqa: F401
    assert 'rclpy' not in sys.modules
