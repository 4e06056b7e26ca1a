"""What make deb-source and make apt-repo-check have pyprofile3.11 of the
python3.11-pyprofile package profile: its flame graph must name
pyprofile_check_function."""

import time


def pyprofile_check_function():
    deadline = time.perf_counter() + 0.5
    x = 0
    while time.perf_counter() < deadline:
        x += 1


pyprofile_check_function()
