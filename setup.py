"""pip's entry to the memplan Python package: setuptools copies python/memplan/*.py, then this
runs the project's CMake to build the compiled halves (_memplan, and _memplan_torch when the
interpreter imports torch and LibTorch's headers are there) into the package, and copies the
bundled data (profiles/gpus.yaml, families.yaml, profiles/models/) to memplan/data. The CMake build folder is
build/pip (beside a developer's build/); nothing is downloaded.
"""

import os
import re
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(memplan VERSION ([0-9.]+)", f.read()).group(1)


class BuildWithCMake(build_py):
    def run(self):
        super().run()
        package = os.path.join(os.path.abspath(self.build_lib), "memplan")
        work = os.path.join(ROOT, "build", "pip", "cmake")
        configure = ["cmake", "-S", ROOT, "-B", work, "-DCMAKE_BUILD_TYPE=Release", "-DMEMPLAN_TESTS=OFF",
                     "-DMEMPLAN_BENCH=OFF", "-DMEMPLAN_WITH_TORCH=OFF", "-DMEMPLAN_PYTHON=ON",
                     f"-DPython3_EXECUTABLE={sys.executable}", f"-DMEMPLAN_PYTHON_PACKAGE_DIR={package}"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        subprocess.check_call(configure)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
        subprocess.check_call(["cmake", "--build", work, "--target", "memplan_python", "-j", jobs])
        # The data ships inside the package; the build tree's pointer to the source tree does not.
        data = os.path.join(package, "data")
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(os.path.join(data, "models"))
        shutil.copy2(os.path.join(ROOT, "profiles", "gpus.yaml"), data)
        shutil.copy2(os.path.join(ROOT, "profiles", "families.yaml"), data)
        models = os.path.join(ROOT, "profiles", "models")
        for name in os.listdir(models):
            if name.endswith(".json") or name == "README.md":
                shutil.copy2(os.path.join(models, name), os.path.join(data, "models"))
        config = os.path.join(package, "_build_config.py")
        if os.path.exists(config):
            os.remove(config)


setup(version=version(), cmdclass={"build_py": BuildWithCMake}, options={"build": {"build_base": "build/pip"}})
