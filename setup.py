"""Packaging: the pipeline's stages are top-level folders (see DESIGN.md) that install as subpackages of
`rootstep`, so that generic names such as `benchmarks` or `flows` never collide with other distributions.

Packages are discovered, not listed: a stage is a top-level folder with an `__init__.py` (the `tests`
folder aside), and every package below a stage ships with it. Everything else is in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent
NOT_SHIPPED = {"rootstep", "tests"}
STAGES = sorted(p.parent.name for p in HERE.glob("*/__init__.py") if p.parent.name not in NOT_SHIPPED)

package_dir = {"rootstep": "rootstep", **{f"rootstep.{stage}": stage for stage in STAGES}}
packages = ["rootstep"]
for stage in STAGES:
    packages.append(f"rootstep.{stage}")
    packages += [f"rootstep.{stage}.{sub}" for sub in find_packages(where=str(HERE / stage))]

setup(packages=packages, package_dir=package_dir)
